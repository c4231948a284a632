// pgqueue-bench: measures pgqueue on a PostgreSQL server and prints a table (and JSON with
// --json). benchmarks/run builds it, starts a throwaway server and runs it; see --help.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "scenarios/scenarios.hpp"
#include "support/peers.hpp"
#include "support/progress.hpp"
#include "support/server.hpp"

namespace {

constexpr const char* usage = R"(usage: pgqueue-bench [options] "<conninfo>"
Runs the benchmark scenarios against the server (each in a database of its own, created and
dropped; the role needs CREATEDB) and prints a table on stdout, progress on stderr.
  --only LIST          scenarios to run, comma-separated (default: all but pinned, soak,
                       observe) enqueue,drain,latency,scale,reference,memory,
                       transactions,cli,limits,pinned,soak,observe
  --json FILE          also write the results as JSON
  --seconds N          length of each timed run (default 5)
  --drain-jobs N       jobs pre-filled for each drain (default 50000)
  --retained N         completed jobs retained in the scale scenario (default 1000000)
  --scale-10m          scale: also with 10,000,000 retained (slow: minutes)
  --observe-retained N observe: done jobs retained over 1,000 queues (default 10000000;
                       building them takes minutes; only with --only observe)
  --observe-keep       observe: keep its database, and reuse one kept with the same size
  --latency-samples N  jobs timed per latency run (default 1200)
  --latency-rate N     jobs per second in the latency runs (default 200)
  --memory-jobs N      jobs in flight in the memory scenario (default 10000)
  --pinned-minutes N   pinned: minutes of jobs in and out while a REPEATABLE READ
                       transaction holds the horizon (default 10; only with --only pinned)
  --pinned-rate N      pinned: jobs per second in and out (default 5000)
  --soak-minutes N     soak: minutes at half the worker's peak rate, gc every 10 s
                       (default 30; only with --only soak)
  --soak-rate N        soak: jobs per second in and out instead of half the peak
  --soak-window N      soak: seconds per sample (default 30)
  --soak-out PREFIX    soak: write PREFIX.tsv and (with gnuplot) PREFIX.png
                       (default /tmp/pgqueue-soak-<time>)
  --soak-table-settings S  soak: ALTER TABLE pgqueue.jobs SET (S) first, e.g.
                       "autovacuum_vacuum_scale_factor = 0.01"
  --peers NODE         also measure graphile-worker and pg-boss (benchmarks/peers/install
                       installs them and prints NODE) in the enqueue, drain, latency and
                       pinned scenarios, and compare every pgqueue row with the best peer
  --peers-script PATH  the peers' runner (default: benchmarks/peers/run.mjs)
  --pgbench PATH       the pgbench to run (default: pgbench on PATH)
  --seed-schema PATH   the seed schema fixture (default: tests/fixtures/seed_schema.sql)
  --after-migrate FILE SQL run in each database right after the schema is installed, to
                       measure a proposed schema change (not the seed reference)
)";

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string self_path() {
  char buf[4096];
  const auto n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "pgqueue-bench";
}

void add_targets(bench::report& rep, const std::string& best_peer_drain) {
  // (a) is 4 sessions claiming 100 jobs each: the worker in that shape is the like-for-like
  // row; concurrency 64 on one session is also held to it (one backend, one core).
  rep.add_target({"batched drain, shape of (a): c400, connections = 4 >= 0.8x (a)",
                  "drain.c400.batched.conn4", "ref.batch", "", 0.8});
  rep.add_target(
      {"batched drain, c64 on one session >= 0.8x (a)", "drain.c64.batched", "ref.batch", "", 0.8});
  if (!best_peer_drain.empty()) {
    rep.add_target({"batched drain, one worker (shape of (a)) >= 2x the best peer's",
                    "drain.c400.batched.conn4", best_peer_drain, "", 2});
  }
  rep.add_target({"batched drain (c64) >= 5x the seed's claim_next+ack (b)", "drain.c64.batched",
                  "ref.seed", "", 5});
  rep.add_target({"enqueue_batch(100) >= 0.8x the same INSERT via pgbench (d100)",
                  "enqueue.batch100", "ref.insert.batch100", "", 0.8});
  rep.add_target({"enqueue_batch(1000) >= 0.8x the same INSERT via pgbench (d1000)",
                  "enqueue.batch1000", "ref.insert.batch1000", "", 0.8});
  rep.add_target({"one-job enqueue, 8 producers >= 0.9x INSERT at pgbench -c 8 (d8)",
                  "enqueue.single.p8", "ref.insert.c8", "", 0.9});
  // The issue times latency from the enqueue's commit; the client sees the commit when
  // enqueue() returns (its reply follows the commit by one socket hop). From the call is
  // stricter: it adds the enqueue's own round trip and WAL flush.
  rep.add_target({"latency p50 <= 1 ms (commit: enqueue() returned -> handler)",
                  "latency.from_return", "", "p50", 1});
  rep.add_target({"latency p99 <= 3 ms (commit: enqueue() returned -> handler)",
                  "latency.from_return", "", "p99", 3});
  rep.add_target(
      {"stricter: p50 <= 1 ms from enqueue() called", "latency.from_call", "", "p50", 1});
  rep.add_target(
      {"stricter: p99 <= 3 ms from enqueue() called", "latency.from_call", "", "p99", 3});
  rep.add_target(
      {"latency under load: p99 <= 2 ms from enqueue() called, worker at half its "
       "peak (load in batches of 10)",
       "latency.loaded.from_call", "", "p99", 2});
  rep.add_target(
      {"drain with retained completed jobs >= 0.8x empty", "scale.retained", "scale.0", "", 0.8});
  rep.add_target(
      {"depth with retained completed jobs < 50 ms", "scale.retained", "", "depth_ms", 50});
  rep.add_target({"--scale-10m: drain with 10 million retained >= 0.8x empty", "scale.10M",
                  "scale.0", "", 0.8});
  rep.add_target(
      {"--scale-10m: depth with 10 million retained < 50 ms", "scale.10M", "", "depth_ms", 50});
  rep.add_target({"pinned horizon: rate held at the end (>= 0.95x the first 20 s)", "pinned.end",
                  "pinned.start", "", 0.95});
  rep.add_target(
      {"soak: rate held at the end (>= 0.95x the rate asked)", "soak.end", "soak.asked", "", 0.95});
  rep.add_target({"soak: size at the end <= 1.1x the middle of the run", "soak.end", "",
                  "size_end_vs_mid", 1.1});
  rep.add_target({"pinned horizon: claim time at the end <= 1.5x the first 20 s", "pinned.end", "",
                  "claim_vs_start", 1.5});
  rep.add_target({"transactional enqueue, 8 producers >= 0.8x the same SQL via pgbench -c 8",
                  "tx.enqueue.p8", "ref.tx_enqueue.c8", "", 0.8});
  rep.add_target(
      {"transactional-handler worker, concurrency 8 >= 0.8x the same SQL via pgbench -c 8",
       "tx.worker.c8", "ref.tx_worker.c8", "", 0.8});
  rep.add_target({"pgqueue enqueue < file >= 0.8x enqueue_batch(1000) (issue 15)",
                  "cli.enqueue.stdin", "cli.library.batch1000", "", 0.8});
  for (const char* what : {"depth", "summary", "metrics"}) {
    rep.add_target(
        {std::string("observe: ") + what + " with 10M done jobs, 1,000 queues: p99 < 50 ms",
         std::string("observe.") + what, "", "p99", 50});
  }
  rep.add_target(
      {"pool checkout: client CPU < 5 us", "pool.checkout", "", "client_us/checkout", 5});
}

std::vector<std::pair<std::string, std::string>> server_facts(const bench::options& opt) {
  return bench::run_async([&](asio::any_io_executor ex)
                              -> asio::awaitable<std::vector<std::pair<std::string, std::string>>> {
    auto db = co_await pgqueue::connect(ex, opt.dsn);
    auto r = co_await db.query(
        "SELECT current_setting('server_version'), current_setting('fsync'), "
        "current_setting('synchronous_commit'), current_setting('shared_buffers')");
    std::vector<std::pair<std::string, std::string>> out{
        {"postgresql", r.get<std::string>(0, 0)},
        {"fsync", r.get<std::string>(0, 1)},
        {"synchronous_commit", r.get<std::string>(0, 2)},
        {"shared_buffers", r.get<std::string>(0, 3)},
    };
    co_return out;
  });
}

std::string today() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  bench::context ctx;
  ctx.opt.self = self_path();
  std::string only = "enqueue,drain,latency,scale,reference,memory,transactions,cli,limits";
  std::string json, child_mode, after_migrate;
  std::vector<std::string> positional;
  try {
    const std::map<std::string, std::function<void(const std::string&)>> takes_value = {
        {"--only", [&](const std::string& v) { only = v; }},
        {"--json", [&](const std::string& v) { json = v; }},
        {"--seconds", [&](const std::string& v) { ctx.opt.seconds = std::stoi(v); }},
        {"--drain-jobs", [&](const std::string& v) { ctx.opt.drain_jobs = std::stol(v); }},
        {"--retained", [&](const std::string& v) { ctx.opt.retained = std::stol(v); }},
        {"--observe-retained",
         [&](const std::string& v) { ctx.opt.observe_retained = std::stol(v); }},
        {"--latency-samples",
         [&](const std::string& v) { ctx.opt.latency_samples = std::stoi(v); }},
        {"--latency-rate", [&](const std::string& v) { ctx.opt.latency_rate = std::stoi(v); }},
        {"--memory-jobs", [&](const std::string& v) { ctx.opt.memory_jobs = std::stoi(v); }},
        {"--pinned-minutes", [&](const std::string& v) { ctx.opt.pinned_minutes = std::stoi(v); }},
        {"--pinned-rate", [&](const std::string& v) { ctx.opt.pinned_rate = std::stoi(v); }},
        {"--soak-minutes", [&](const std::string& v) { ctx.opt.soak_minutes = std::stoi(v); }},
        {"--soak-rate", [&](const std::string& v) { ctx.opt.soak_rate = std::stoi(v); }},
        {"--soak-window",
         [&](const std::string& v) { ctx.opt.soak_window_seconds = std::stoi(v); }},
        {"--soak-out", [&](const std::string& v) { ctx.opt.soak_out = v; }},
        {"--soak-table-settings", [&](const std::string& v) { ctx.opt.soak_table_settings = v; }},
        {"--pgbench", [&](const std::string& v) { ctx.opt.pgbench = v; }},
        {"--peers", [&](const std::string& v) { ctx.opt.peers_node = v; }},
        {"--peers-script", [&](const std::string& v) { ctx.opt.peers_script = v; }},
        {"--seed-schema", [&](const std::string& v) { ctx.opt.seed_schema = v; }},
        {"--after-migrate",
         [&](const std::string& v) {
           after_migrate = v;
           ctx.opt.after_migrate = read_text(v);
         }},
        {"--memory-child", [&](const std::string& v) { child_mode = v; }},  // see memory.cpp
    };
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--help" || a == "-h") {
        std::fputs(usage, stdout);
        return 0;
      }
      if (a == "--scale-10m") {
        ctx.opt.scale_10m = true;
      } else if (a == "--observe-keep") {
        ctx.opt.observe_keep = true;
      } else if (auto it = takes_value.find(a); it != takes_value.end()) {
        if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
        it->second(argv[++i]);
      } else if (a.rfind("--", 0) == 0) {
        throw std::runtime_error("unknown option " + a);
      } else {
        positional.push_back(a);
      }
    }
    if (positional.size() != 1) throw std::runtime_error("expected one conninfo argument");
    if (ctx.opt.seconds < 1 || ctx.opt.drain_jobs < 1 || ctx.opt.latency_rate < 1 ||
        ctx.opt.latency_samples < 1 || ctx.opt.memory_jobs < 1 || ctx.opt.memory_jobs > 10000 ||
        ctx.opt.retained < 1 || ctx.opt.observe_retained < 1000 || ctx.opt.pinned_minutes < 1 ||
        ctx.opt.pinned_rate < 100 || ctx.opt.soak_minutes < 1 || ctx.opt.soak_rate < 0 ||
        ctx.opt.soak_window_seconds < 1) {
      throw std::runtime_error("a numeric option is out of range");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pgqueue-bench: %s\n%s", e.what(), usage);
    return 2;
  }
  ctx.opt.dsn = positional[0];
  if (!child_mode.empty()) return bench::memory_child(child_mode, ctx.opt.dsn, ctx.opt.memory_jobs);

  const std::vector<std::pair<std::string, std::function<void(bench::context&)>>> scenarios = {
      {"enqueue", bench::run_enqueue},
      {"drain", bench::run_drain},
      {"latency", bench::run_latency},
      {"scale", bench::run_scale},
      {"reference", bench::run_reference},
      {"memory", bench::run_memory},
      {"pinned", bench::run_pinned},
      {"soak", bench::run_soak},
      {"transactions", bench::run_transactions},
      {"cli", bench::run_cli},
      {"observe", bench::run_observe},
      {"limits", bench::run_limits},
  };
  std::map<std::string, bool> wanted;
  std::stringstream list(only);
  for (std::string s; std::getline(list, s, ',');) wanted[s] = true;
  for (const auto& [name, _] : wanted) {
    bool known = false;
    for (const auto& s : scenarios) known = known || s.first == name;
    if (!known) {
      std::fprintf(stderr, "pgqueue-bench: unknown scenario '%s'\n%s", name.c_str(), usage);
      return 2;
    }
  }

  bench::bench_start();
  int failures = 0;
  try {
    auto meta = server_facts(ctx.opt);
    meta.insert(meta.begin(), {"date", today()});
    meta.push_back({"cores", std::to_string(std::thread::hardware_concurrency())});
    meta.push_back({"seconds_per_run", std::to_string(ctx.opt.seconds)});
    if (!after_migrate.empty()) meta.push_back({"after_migrate", after_migrate});
    ctx.rep.set_header(std::move(meta));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pgqueue-bench: cannot reach the server: %s\n", e.what());
    return 1;
  }
  for (const auto& [name, run] : scenarios) {
    if (!wanted.count(name)) continue;
    try {
      run(ctx);
    } catch (const std::exception& e) {
      ++failures;
      bench::say(name, std::string("FAILED: ") + e.what());
      bench::row r{name + ".failed", name, "scenario failed"};
      r.note = e.what();
      ctx.rep.add(std::move(r));
    }
  }
  add_targets(ctx.rep, bench::compare_with_peers(ctx.rep));
  bench::say("done", "");
  ctx.rep.print_table(stdout);
  if (!json.empty()) {
    try {
      ctx.rep.write_json(json);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pgqueue-bench: %s\n", e.what());
      return 1;
    }
  }
  return failures ? 1 : 0;
}
