// pgqueue::job_event: what a worker tells an observer about each job, for the application's
// own logging and metrics (the library itself logs nothing).
#pragma once

#include <chrono>
#include <functional>
#include <string_view>

#include "pgqueue/job.hpp"

namespace pgqueue {

/// What happened to a job in a worker. Every claimed job gets `claimed`, then either
/// `started` and one of the four endings, or (claimed while the worker was stopping) an ending
/// without `started`: `released`, or `lost` when even that failed.
enum class job_event_kind {
  claimed,   ///< a claim took it (the job's claimed_at - due_at is how long it waited)
  started,   ///< its handler is about to run
  finished,  ///< the handler succeeded: acked (or its ack queued with others; one the server
             ///< does not confirm counts as lost in worker::stats(), not as a second event)
  failed,    ///< the handler failed and the job was nacked (retried, or dead after its last
             ///< attempt: job.attempts == job.max_attempts)
  lost,      ///< the lease was lost, or the outcome could not be learnt: it runs again
  released,  ///< given back unfinished (a stop, or the handler released it): ready again, the
             ///< attempt not counted
};

/// One event. The references are valid only during the observer's call.
struct job_event {
  job_event_kind kind;
  const pgqueue::job& job;
  /// The handler's run time (for endings after `started`; zero otherwise).
  std::chrono::steady_clock::duration run_time{};
  /// For `failed`: the message the nack carried (empty when the handler nacked itself).
  std::string_view error{};
};

/// Called by the worker on its strand, in order for each job, for every event above. It must
/// not block (the worker's loops and handlers share that strand) and must not throw (it is
/// called from noexcept context: a throw terminates). Several workers may share one observer
/// (then it guards its own state: they may run on different threads).
using job_observer = std::function<void(const job_event&)>;

}  // namespace pgqueue
