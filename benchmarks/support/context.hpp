// What every scenario gets: the run's options and the report it adds rows to.
#pragma once

#include <string>

#include "report.hpp"

namespace bench {

struct options {
  std::string dsn;                   ///< the server (any database); scenarios create their own
  int seconds = 5;                   ///< length of each timed run
  long drain_jobs = 50000;           ///< jobs pre-filled for a drain (scale: 20,000)
  long retained = 1000000;           ///< completed jobs retained in the scale scenario
  bool scale_10m = false;            ///< also measure with 10,000,000 retained
  long observe_retained = 10000000;  ///< observe: done jobs retained over its 1,000 queues
  bool observe_keep = false;         ///< observe: keep its database (and reuse a kept one)
  int latency_samples = 1200;        ///< jobs timed in a latency run (after a warm-up)
  int latency_rate = 200;            ///< jobs per second enqueued in a latency run
  int memory_jobs = 10000;           ///< leases held in the memory scenario
  int pinned_minutes = 10;           ///< length of the pinned-horizon run
  int pinned_rate = 5000;            ///< jobs per second in and out in the pinned-horizon run
  int soak_minutes = 30;             ///< length of the soak
  int soak_rate = 0;             ///< soak: jobs per second in and out (0: half the worker's peak)
  int soak_window_seconds = 30;  ///< soak: one sample per window
  std::string soak_out;          ///< soak: PREFIX for PREFIX.tsv and PREFIX.png
  std::string soak_table_settings;  ///< soak: storage parameters set on pgqueue.jobs first
  std::string pgbench = "pgbench";
  std::string seed_schema = PGQUEUE_BENCH_SOURCE_ROOT "/tests/fixtures/seed_schema.sql";
  std::string self;           ///< this executable, re-run for the memory scenario's child processes
  std::string after_migrate;  ///< SQL run after installing the schema (trying a schema change)
  std::string peers_node;     ///< --peers: the Node.js that runs the peers (empty: no peers)
  std::string peers_script = PGQUEUE_BENCH_SOURCE_ROOT "/benchmarks/peers/run.mjs";
};

struct context {
  options opt;
  report rep;
};

/// The JSON every benchmark job carries (the pgbench references insert the same text).
inline constexpr const char* bench_payload = R"({"to": "user@example.com", "n": 1})";

/// The queue every scenario uses (each in its own database).
inline constexpr const char* bench_queue = "bench";

}  // namespace bench
