// Running the peers' scenarios (benchmarks/peers/run.mjs) and comparing pgqueue's rows with
// the best of them.
#include "peers.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "pgbench.hpp"
#include "progress.hpp"
#include "server.hpp"

namespace bench {
namespace {

const std::string peer_db = "pgqueue_bench_peer";

std::map<std::string, std::string> key_values(std::istringstream& words) {
  std::map<std::string, std::string> out;
  for (std::string w; words >> w;) {
    const auto eq = w.find('=');
    if (eq != std::string::npos) out[w.substr(0, eq)] = w.substr(eq + 1);
  }
  return out;
}

// run.mjs takes libpq's parts of the conninfo as options (node-postgres does not read libpq
// conninfo strings).
std::vector<std::string> connection_args(const std::string& dsn) {
  char* err = nullptr;
  std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> parsed(
      PQconninfoParse(dsn.c_str(), &err), PQconninfoFree);
  if (!parsed) {
    const std::string why = err ? err : "cannot parse the conninfo";
    PQfreemem(err);
    throw std::runtime_error(why);
  }
  std::vector<std::string> out;
  for (auto* o = parsed.get(); o->keyword; ++o) {
    const std::string key = o->keyword;
    if (!o->val || !*o->val) continue;
    if (key == "host" || key == "port" || key == "user" || key == "password") {
      out.push_back("--" + key);
      out.push_back(o->val);
    }
  }
  return out;
}

double number(const std::map<std::string, std::string>& kv, const std::string& key) {
  auto it = kv.find(key);
  if (it == kv.end()) throw std::runtime_error("the peer printed no " + key);
  return std::stod(it->second);
}

std::string short_name(const std::string& peer) {
  return peer == "pg-boss" ? "boss" : "gw";
}

row peer_row(const std::string& id, const std::string& shown_as, const std::string& peer,
             const peer_output& out, const std::string& what) {
  auto v = out.result.find("version");
  row r{id, shown_as, peer + " " + (v == out.result.end() ? "?" : v->second) + ": " + what};
  r.tag = "(" + short_name(peer) + ")";
  return r;
}

latency latency_of(const std::map<std::string, std::string>& kv, const std::string& prefix,
                   int samples) {
  latency l;
  l.samples = samples;
  l.p50 = number(kv, prefix + "p50_ms");
  l.p90 = number(kv, prefix + "p90_ms");
  l.p99 = number(kv, prefix + "p99_ms");
  l.max = number(kv, prefix + "max_ms");
  return l;
}

void add_rows(context& ctx, const std::string& scenario, const std::string& shown_as,
              const std::string& peer, const peer_output& out) {
  const std::string base = "peer." + scenario + "." + peer;
  if (scenario == "drain") {
    row r = peer_row(base, shown_as, peer, out,
                     "batched drain (graphile-worker localQueue 100, concurrency 4; pg-boss "
                     "batchSize 100, 4 workers)");
    r.rate = number(out.result, "jobs_per_s");
    if (number(out.result, "finished") == 0) {
      r.note = out.result.at("jobs") + " of " + std::to_string(ctx.opt.drain_jobs) + " jobs";
    }
    ctx.rep.add(std::move(r));
  } else if (scenario == "enqueue1" || scenario == "enqueue_batch") {
    row r = peer_row(
        base, shown_as, peer, out,
        scenario == "enqueue1" ? "one job per call, 8 callers" : "batches of 1000, 1 caller");
    r.rate = number(out.result, "jobs_per_s");
    r.extra = {{"call_p50_ms", number(out.result, "p50_ms")}};
    ctx.rep.add(std::move(r));
  } else if (scenario == "latency") {
    const auto wake = out.result.count("wakeup") ? out.result.at("wakeup") : "?";
    for (const std::string from : {"from_call", "from_return"}) {
      row r =
          peer_row(base + "." + from, shown_as, peer, out,
                   "idle worker: add " + std::string(from == "from_call" ? "called" : "returned") +
                       " -> handler");
      r.lat = latency_of(out.result, from + "_", ctx.opt.latency_samples);
      r.note = "wake-up: " + wake;
      ctx.rep.add(std::move(r));
    }
  } else if (scenario == "pinned") {
    int n = 0;
    for (const auto& w : out.windows) {
      ++n;
      row r = peer_row(base + ".w" + std::to_string(n), shown_as, peer, out,
                       "pinned horizon, window " + std::to_string(n));
      r.rate = number(w, "done_per_s");
      r.extra = {{"ready", number(w, "backlog")}};
      ctx.rep.add(std::move(r));
    }
    row first = peer_row(base + ".start", shown_as, peer, out, "pinned horizon, first window");
    first.rate = number(out.result, "start_per_s");
    row last = peer_row(base + ".end", shown_as, peer, out, "pinned horizon, last window");
    last.rate = number(out.result, "end_per_s");
    last.extra = {{"table_mb", number(out.result, "table_mb")},
                  {"index_mb", number(out.result, "index_mb")},
                  {"dead_tuples", number(out.result, "dead_tuples")}};
    ctx.rep.add(std::move(first));
    ctx.rep.add(std::move(last));
  }
}

std::vector<std::string> scenario_args(const options& opt, const std::string& scenario) {
  if (scenario == "drain") {
    return {"--jobs", std::to_string(opt.drain_jobs), "--seconds", std::to_string(opt.seconds)};
  }
  if (scenario == "latency") {
    return {"--samples", std::to_string(opt.latency_samples), "--rate",
            std::to_string(opt.latency_rate)};
  }
  if (scenario == "pinned") {
    return {"--minutes",        std::to_string(opt.pinned_minutes),
            "--rate",           std::to_string(opt.pinned_rate),
            "--window-seconds", "20"};
  }
  return {"--seconds", std::to_string(opt.seconds)};
}

// The best of `ids` that the report has: the highest rate, or (by_latency) the lowest p50.
std::string best(const report& rep, const std::vector<std::string>& ids, bool by_latency) {
  std::string out;
  double best_value = 0;
  for (const auto& id : ids) {
    const row* r = rep.find(id);
    if (!r) continue;
    const double v = by_latency ? (r->lat ? -r->lat->p50 : -1e300) : r->rate.value_or(-1);
    if (out.empty() || v > best_value) {
      out = id;
      best_value = v;
    }
  }
  return out;
}

}  // namespace

const std::vector<std::string>& peer_names() {
  static const std::vector<std::string> names = {"graphile-worker", "pg-boss"};
  return names;
}

peer_output run_peer(const options& opt, const std::string& peer, const std::string& scenario,
                     const std::vector<std::string>& args) {
  run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
    auto db = co_await fresh_database(opt, peer_db, false);
    db.close();
  });
  std::vector<std::string> argv = {opt.peers_node, opt.peers_script, "--peer",     peer,
                                   "--scenario",   scenario,         "--database", peer_db};
  for (const auto& a : connection_args(opt.dsn)) argv.push_back(a);
  for (const auto& a : args) argv.push_back(a);
  process_result p;
  try {
    p = run_process(argv, true);
  } catch (...) {
    run_async([&](asio::any_io_executor) { return drop_database(opt, peer_db); });
    throw;
  }
  run_async([&](asio::any_io_executor) { return drop_database(opt, peer_db); });
  if (p.exit_code != 0) {
    throw std::runtime_error(peer + " " + scenario + " exited with " + std::to_string(p.exit_code) +
                             ": " + p.output);
  }
  peer_output out;
  std::istringstream lines(p.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "result") out.result = key_values(words);
    if (kind == "window") out.windows.push_back(key_values(words));
  }
  if (out.result.empty()) throw std::runtime_error(peer + " " + scenario + " printed no result");
  return out;
}

void add_peer_rows(context& ctx, const std::string& scenario, const std::string& shown_as) {
  if (ctx.opt.peers_node.empty()) return;
  for (const auto& peer : peer_names()) {
    say(shown_as, peer + ": " + scenario);
    try {
      add_rows(ctx, scenario, shown_as, peer,
               run_peer(ctx.opt, peer, scenario, scenario_args(ctx.opt, scenario)));
    } catch (const std::exception& e) {
      say(shown_as, peer + " FAILED: " + e.what());
      row r{"peer." + scenario + "." + peer + ".failed", shown_as, peer + ": " + scenario};
      r.note = std::string("failed: ") + e.what();
      ctx.rep.add(std::move(r));
    }
  }
}

std::string compare_with_peers(report& rep) {
  auto ids = [](const std::string& scenario, const std::string& suffix) {
    std::vector<std::string> out;
    for (const auto& p : peer_names()) out.push_back("peer." + scenario + "." + p + suffix);
    return out;
  };
  const std::string drain = best(rep, ids("drain", ""), false);
  // Each pgqueue row (by id prefix) and the best peer row of the same kind.
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"drain.", drain},
      {"enqueue.single.p8", best(rep, ids("enqueue1", ""), false)},
      {"enqueue.batch1000", best(rep, ids("enqueue_batch", ""), false)},
      {"latency.from_call", best(rep, ids("latency", ".from_call"), true)},
      {"latency.from_return", best(rep, ids("latency", ".from_return"), true)},
      {"pinned.start", best(rep, ids("pinned", ".start"), false)},
      {"pinned.end", best(rep, ids("pinned", ".end"), false)},
  };
  for (const auto& [prefix, peer] : pairs) {
    if (!peer.empty()) rep.add_ref_by_prefix(prefix, peer);
  }
  return drain;
}

}  // namespace bench
