// pgqueue retry, cancel, gc, pause, resume: what an operator changes by hand.
#include <algorithm>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "../commands.hpp"
#include "../output.hpp"

namespace pgqueue_cli {

namespace {

// Refuses a queue the database does not know (no jobs, counters, pause or schedule): most
// likely a typo, which a destructive command must not act on (exit 2, nothing done).
// A role that may not read what this looks at (42501) is not refused here: the command itself
// then names what the role may not do, rather than a table it never asked for.
asio::awaitable<void> require_known_queue(pgqueue::database& db, const std::string& queue) {
  pgqueue::pg::params p{queue};
  std::optional<pgqueue::pg::result> r;
  try {
    r.emplace(co_await db.query(
        "SELECT EXISTS (SELECT FROM pgqueue.queue_summary() s WHERE s.queue = $1) "
        "OR EXISTS (SELECT FROM pgqueue.schedules s WHERE s.queue = $1)",
        std::move(p)));
  } catch (const pgqueue::error& e) {
    if (e.sqlstate() != "42501") throw;
  }
  if (r && !r->get<bool>(0, 0)) {
    throw usage_error("no queue named '" + printable(queue) +
                      "' (it has no jobs, no counters and no schedule); nothing done");
  }
}

}  // namespace

int retry(const context& ctx, const std::string& queue, const std::vector<std::int64_t>& ids) {
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    co_await require_known_queue(db, queue);
    pgqueue::pg::params p{queue};
    if (ids.empty()) {
      p.add(std::nullopt);
    } else {
      p.add(ids);
    }
    auto r = co_await db.query("SELECT pgqueue.retry_dead($1, $2::bigint[])", std::move(p));
    const int n = r.get<int>(0, 0);
    if (ctx.json) {
      std::cout << nlohmann::json{{"retried", n}}.dump() << "\n";
    } else {
      std::cout << "retried " << n << " dead job" << (n == 1 ? "" : "s") << " of " << queue << "\n";
    }
    // 1: nothing to retry; with ids, fewer retried than named (they were not dead).
    co_return n == 0 || (!ids.empty() && n < static_cast<int>(ids.size())) ? exit_code::answer_no
                                                                           : exit_code::ok;
  });
}

int cancel(const context& ctx, const std::vector<std::int64_t>& ids) {
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    auto cancelled = nlohmann::json::array(), not_cancelled = nlohmann::json::array();
    std::vector<std::int64_t> seen;
    for (auto id : ids) {
      if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;  // named twice
      seen.push_back(id);
      pgqueue::pg::params p{id};
      auto r = co_await db.query("SELECT pgqueue.cancel($1)", std::move(p));
      (r.get<bool>(0, 0) ? cancelled : not_cancelled).push_back(id);
    }
    if (ctx.json) {
      std::cout << nlohmann::json{{"cancelled", cancelled}, {"not_cancelled", not_cancelled}}.dump()
                << "\n";
    } else {
      for (auto& id : cancelled) std::cout << "cancelled " << id << "\n";
      for (auto& id : not_cancelled) {
        std::cout << "not cancelled " << id << " (no such job, or not ready or waiting)\n";
      }
    }
    co_return not_cancelled.empty() ? exit_code::ok : exit_code::answer_no;
  });
}

int gc(const context& ctx, const std::string& retain_done, const std::string& retain_dead) {
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    pgqueue::pg::params p{retain_done, retain_dead};
    auto r =
        co_await db.query("SELECT * FROM pgqueue.gc($1::interval, $2::interval)", std::move(p));
    const auto done = r.get<std::int64_t>(0, 0), dead = r.get<std::int64_t>(0, 1);
    if (ctx.json) {
      // done_deleted: done and cancelled jobs (as pgqueue.gc counts them)
      std::cout << nlohmann::json{{"done_deleted", done}, {"dead_deleted", dead}}.dump() << "\n";
    } else {
      std::cout << "deleted " << done << " done or cancelled and " << dead << " dead jobs\n";
    }
    co_return exit_code::ok;
  });
}

int pause(const context& ctx, const std::string& queue, bool paused, bool force) {
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    if (paused && !force) co_await require_known_queue(db, queue);
    pgqueue::queue q{db, queue};
    bool changed = false;
    if (paused) {
      changed = co_await q.pause();
    } else {
      changed = co_await q.resume();
    }
    if (ctx.json) {
      std::cout << nlohmann::json{{"queue", queue}, {"paused", paused}, {"changed", changed}}.dump()
                << "\n";
    } else {
      std::cout << printable(queue)
                << (paused ? (changed ? " paused" : " was paused already")
                           : (changed ? " resumed" : " was not paused"))
                << "\n";
    }
    co_return exit_code::ok;
  });
}

}  // namespace pgqueue_cli
