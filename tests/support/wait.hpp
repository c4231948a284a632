// A bounded wait for code outside any io_context (a fault-injection thread, a test driving
// child processes): re-checks a condition at a short interval until it holds or time runs out.
#pragma once

#include <chrono>
#include <thread>

namespace pgq_test {

// Re-checks `condition` every `every` until it holds or `limit` passes; returns whether it held.
// For states with no event to wait on (rows in the database, another process's progress).
template <class Condition>
bool wait_until(Condition&& condition, std::chrono::milliseconds limit,
                std::chrono::milliseconds every = std::chrono::milliseconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
  return true;
}

}  // namespace pgq_test
