// The dashboard's style sheet.
#include "../assets.hpp"

namespace pgqueue_cli::dashboard {

const std::string_view app_css = R"css(:root {
  --fg: #1d2330; --muted: #687085; --line: #dde1ea; --bg: #f6f7fa; --card: #fff;
  --enqueued: #2f6fdf; --done: #1f9d55; --failed: #d64545;
}
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif;
       color: var(--fg); background: var(--bg); }
header { display: flex; align-items: baseline; gap: 16px; padding: 12px 24px;
         background: #1d2330; color: #fff; }
header h1 { margin: 0; font-size: 20px; }
#mode { font-size: 12px; padding: 2px 8px; border-radius: 10px; background: #3a4358; }
#mode.actions-on { background: #8a5a00; }
#status { margin-left: auto; font-size: 13px; color: #c9cfdd; }
#status.bad { color: #ffb4b4; }
main { padding: 12px 24px 32px; display: grid; gap: 16px; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 6px;
          padding: 12px 16px; overflow-x: auto; }
h2 { margin: 0 0 8px; font-size: 15px; }
.note { font-weight: normal; color: var(--muted); font-size: 12px; margin-left: 8px; }
table { border-collapse: collapse; width: 100%; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: left;
         vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; white-space: nowrap; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.name { font-weight: 600; word-break: break-all; }
tr.paused td { background: #fff8e6; }
td.alert { color: var(--failed); font-weight: 600; }
.payload { font-family: ui-monospace, monospace; font-size: 12px; word-break: break-all;
           max-width: 360px; }
.last-error { color: var(--failed); white-space: pre-wrap; word-break: break-word; }
.history { margin: 4px 0 0; padding-left: 20px; color: var(--muted); font-size: 12px;
           white-space: pre-wrap; word-break: break-word; }
details summary { cursor: pointer; color: var(--muted); font-size: 12px; }
.actions { white-space: nowrap; text-align: right; }
button { font: inherit; font-size: 12px; padding: 2px 10px; margin-left: 4px; cursor: pointer;
         border: 1px solid #b9c0d0; border-radius: 4px; background: #fff; }
button:hover { background: #eef1f7; }
button:disabled { opacity: 0.5; cursor: default; }
.empty { color: var(--muted); margin: 4px 0; }
#chart { width: 100%; height: 180px; display: block; background: #fbfcfd;
         border: 1px solid var(--line); }
#chart .grid { stroke: var(--line); stroke-width: 1; }
#chart .series { fill: none; stroke-width: 2; vector-effect: non-scaling-stroke; }
#chart .enqueued { stroke: var(--enqueued); }
#chart .done { stroke: var(--done); }
#chart .failed { stroke: var(--failed); }
.axis { display: flex; justify-content: space-between; color: var(--muted); font-size: 12px; }
.legend { font-weight: normal; font-size: 12px; margin-left: 8px; }
.key::before { content: ""; display: inline-block; width: 12px; height: 3px; margin: 0 4px 3px 8px;
               vertical-align: middle; background: currentColor; }
.key.enqueued { color: var(--enqueued); }
.key.done { color: var(--done); }
.key.failed { color: var(--failed); }
)css";

}  // namespace pgqueue_cli::dashboard
