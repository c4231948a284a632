// The dashboard's page: a skeleton that app.js fills from /api/dashboard.
#include "../assets.hpp"

namespace pgqueue_cli::dashboard {

namespace {

constexpr std::string_view head = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
)html";

constexpr std::string_view rest = R"html(<title>pgqueue</title>
<link rel="stylesheet" href="/app.css">
<script src="/app.js" defer></script>
</head>
<body>
<header>
  <h1>pgqueue</h1>
  <span id="mode"></span>
  <span id="status" role="status">loading…</span>
</header>
<noscript>This page needs JavaScript. The same numbers: <a href="/api/dashboard">/api/dashboard</a>
(JSON), <a href="/metrics">/metrics</a> (Prometheus).</noscript>
<main>
<section>
  <h2>Queues</h2>
  <table id="queues">
    <thead><tr>
      <th>queue</th><th>state</th><th class="num">ready</th><th class="num">scheduled</th>
      <th class="num">claimed</th><th class="num">dead</th><th class="num">cancelled</th>
      <th class="num">done</th><th class="num">waiting</th><th class="num">oldest ready</th><th class="num">lag</th>
      <th class="num">enqueued/s</th><th class="num">done/s</th><th class="num">failed/s</th>
      <th class="actions"></th>
    </tr></thead>
    <tbody></tbody>
  </table>
  <p class="empty" id="queues-empty" hidden>No queues yet.</p>
</section>
<section>
  <h2>Throughput <span class="legend"><span class="key enqueued">enqueued/s</span>
    <span class="key done">done/s</span> <span class="key failed">failed/s</span></span></h2>
  <svg id="chart" viewBox="0 0 800 180" preserveAspectRatio="none" role="img"
       aria-label="jobs per second over time"></svg>
  <div class="axis"><span id="chart-from"></span><span id="chart-max"></span><span id="chart-to"></span></div>
</section>
<section>
  <h2>Dead jobs <span class="note" id="dead-note"></span></h2>
  <table id="dead">
    <thead><tr>
      <th class="num">id</th><th>queue</th><th class="num">attempts</th><th>died</th>
      <th>errors</th><th>payload</th><th class="actions"></th>
    </tr></thead>
    <tbody></tbody>
  </table>
  <p class="empty" id="dead-empty" hidden>No dead jobs.</p>
</section>
<section>
  <h2>Next jobs <span class="note">each queue's next ready jobs, in claim order</span></h2>
  <table id="next">
    <thead><tr>
      <th class="num">id</th><th>queue</th><th class="num">priority</th><th>due</th>
      <th class="num">attempts</th><th>payload</th><th class="actions"></th>
    </tr></thead>
    <tbody></tbody>
  </table>
  <p class="empty" id="next-empty" hidden>No ready jobs.</p>
</section>
</main>
</body>
</html>
)html";

}  // namespace

std::string page_html(const std::string& token) {
  std::string page(head);
  // The token is 64 hex digits (token.hpp): nothing in it needs escaping.
  if (!token.empty()) page += "<meta name=\"pgqueue-token\" content=\"" + token + "\">\n";
  page += rest;
  return page;
}

}  // namespace pgqueue_cli::dashboard
