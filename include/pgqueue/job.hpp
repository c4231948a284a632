// A claimed job as the queue hands it to a worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace pgqueue {

/// One claimed job. `attempts` counts the attempts used, this one included (1 on the first
/// run; a release gives one back); the job ends `dead` when an attempt numbered
/// `max_attempts` fails. (What fences the lease is a separate token that only grows.)
struct job {
  std::int64_t id = 0;
  std::string queue;
  std::string payload;  ///< JSON text as the server normalises it (jsonb output).
  int priority = 0;
  int attempts = 0;
  int max_attempts = 0;
  /// When the job became due (its enqueue, its `run_after`, or when a retry was due) and when
  /// this claim took it, both by the server's clock: `claimed_at - due_at` is how long it
  /// waited for a worker, whatever the two machines' clocks say.
  std::chrono::system_clock::time_point due_at{};
  std::chrono::system_clock::time_point claimed_at{};
};

}  // namespace pgqueue
