// What a worker does with a job once its handler has returned or thrown, without I/O.
#pragma once

namespace pgqueue::detail {

/// The worker's next step for a job whose handler ended.
enum class job_step {
  counted,     ///< the handler acked, nacked or released it itself: only count that
  forgotten,   ///< failed with the lease lost: the job comes back when its lease expires
  given_back,  ///< failed during a forced stop: released, the attempt not counted
  nacked,      ///< failed: nacked with the handler's message (retried or dead)
  coalesced,   ///< done: its ack waits to ride with the next claim, or goes in a batch
  acked,       ///< done: acked on its own
};

/// `finished_by_handler`: the handler ended the lease itself. `failed`: it threw. `lost`: the
/// lease was lost meanwhile. `forced`: the stop's timeout cancelled the handlers. A handler
/// that returned normally finished its job, lost lease, stop or not: the server decides
/// whether the ack still counts.
inline job_step next_step(bool finished_by_handler, bool failed, bool lost, bool forced,
                          bool coalesce_acks) {
  if (finished_by_handler) return job_step::counted;
  if (failed && lost) return job_step::forgotten;
  if (failed && forced) return job_step::given_back;
  if (failed) return job_step::nacked;
  return coalesce_acks ? job_step::coalesced : job_step::acked;
}

/// Whether coalesced acks go out now as a batch of their own: while the worker is idle (no
/// claim is coming to carry them) or stopping; otherwise the next claim takes them along.
inline bool flush_acks_now(bool idle, bool stopping) {
  return idle || stopping;
}

}  // namespace pgqueue::detail
