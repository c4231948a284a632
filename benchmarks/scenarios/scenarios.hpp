// The scenarios of pgqueue-bench. Each creates its own database, measures, adds rows to the
// report and drops the database again.
#pragma once

#include <string>

#include "../support/context.hpp"

namespace bench {

void run_enqueue(context& ctx);       ///< one job per call (1 and 8 producers), enqueue_batch
void run_drain(context& ctx);         ///< a worker draining pre-filled jobs, with/without batching
void run_latency(context& ctx);       ///< enqueue-to-handler latency at a steady rate
void run_scale(context& ctx);         ///< drain and depth with many completed jobs retained
void run_reference(context& ctx);     ///< pgbench driving the raw SQL (and the seed schema)
void run_memory(context& ctx);        ///< peak RSS with many jobs in flight
void run_pinned(context& ctx);        ///< a steady rate while a transaction holds the horizon
void run_soak(context& ctx);          ///< half the peak rate for a long time, gc running
void run_transactions(context& ctx);  ///< transactional enqueue on a pool, checkout cost
void run_cli(context& ctx);           ///< the pgqueue command's enqueue from stdin vs the library
void run_observe(context& ctx);       ///< depth, queue_summary, metrics with 10M done jobs
void run_limits(context& ctx);        ///< concurrency- and rate-limited queues, claim overhead

/// The memory scenario's child process: prints "<baseline KiB> <peak KiB>" and exits.
int memory_child(const std::string& mode, const std::string& dsn, int jobs);

}  // namespace bench
