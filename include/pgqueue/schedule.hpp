// pgqueue::schedule: periodic jobs, declared from C++ (pgqueue.schedule in SQL).
#pragma once

#include <string>
#include <string_view>

#include <asio/awaitable.hpp>

#include "pgqueue/connect.hpp"
#include "pgqueue/detail/config.hpp"

namespace pgqueue {

/// A periodic job: at each slot of `cron` a job with `payload`, `priority` and `max_attempts`
/// is enqueued into `queue`, exactly once per slot however many processes run. Slots are fired
/// by the maintenance that claims run (each session looks at most once a second), so a
/// running fleet of workers fires them with nothing else deployed; idle workers of `queue`
/// wake for them.
struct schedule {
  std::string name;   ///< identifies the schedule (1 to 255 bytes)
  std::string queue;  ///< where its jobs go
  /// Five cron fields (minute hour day-of-month month day-of-week: `*`, `n`, `a-b`, `/step`,
  /// lists, JAN-DEC, SUN-SAT), `@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly`, or
  /// `@every <interval>` (whole seconds, at least 1; slots are multiples of it since the epoch).
  std::string cron;
  std::string payload = "{}";     ///< JSON of every job it enqueues
  std::string time_zone = "UTC";  ///< the wall clock the cron fields are read in (IANA name)
  /// After a time when nothing fired it (no claims ran): enqueue one job for the latest missed
  /// slot (`latest`) or none (`skip`). A slot counts as missed once it is older than twice
  /// the schedule's period plus a second (at most a minute); later slots are always fired.
  enum class catch_up_policy { latest, skip } catch_up = catch_up_policy::latest;
  int priority = 0;
  int max_attempts = 5;
};

/// Creates or updates the schedule named `s.name`; an unchanged declaration changes nothing
/// (so every process may declare its schedules at start-up). True when something changed.
/// One round trip. Throws the server's 22023 for an invalid expression, zone, queue name, or
/// an expression that never fires (nothing stored), 22P02 for invalid JSON.
asio::awaitable<bool> declare_schedule(database& db, const schedule& s);

/// Removes a schedule (the jobs it enqueued stay). False when there was none. One round trip.
asio::awaitable<bool> remove_schedule(database& db, std::string_view name);

}  // namespace pgqueue

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/impl/schedule.ipp"
#endif
