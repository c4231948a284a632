// A claimed job as the queue hands it to a worker.
#pragma once

#include <cstdint>
#include <string>

namespace pgqueue {

/// One claimed job. `attempts` counts this claim (1 on the first run) and is the lease's fencing
/// token; the job ends `dead` when an attempt numbered `max_attempts` fails.
struct job {
  std::int64_t id = 0;
  std::string queue;
  std::string payload;  ///< JSON text as the server normalises it (jsonb output).
  int priority = 0;
  int attempts = 0;
  int max_attempts = 0;
};

}  // namespace pgqueue
