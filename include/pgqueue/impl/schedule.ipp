// Out-of-line definitions of pgqueue/schedule.hpp: included at its end (header-only), or
// compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/schedule.hpp"

namespace pgqueue {

PGQUEUE_DECL asio::awaitable<bool> declare_schedule(database& db, const schedule& s) {
  pg::params p{
      s.name,      s.queue,
      s.cron,      s.payload,
      s.time_zone, std::string(s.catch_up == schedule::catch_up_policy::skip ? "skip" : "latest"),
      s.priority,  s.max_attempts};
  auto r = co_await db.query("SELECT pgqueue.schedule($1, $2, $3, $4::jsonb, $5, $6, $7, $8)",
                             std::move(p));
  co_return r.get<bool>(0, 0);
}

PGQUEUE_DECL asio::awaitable<bool> remove_schedule(database& db, std::string_view name) {
  pg::params p{std::string(name)};
  auto r = co_await db.query("SELECT pgqueue.unschedule($1)", std::move(p));
  co_return r.get<bool>(0, 0);
}

}  // namespace pgqueue
