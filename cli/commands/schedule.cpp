// pgqueue schedule, schedules, unschedule: periodic jobs (pgqueue.schedules).
#include <iostream>

#include <nlohmann/json.hpp>

#include "../commands.hpp"
#include "../output.hpp"

namespace pgqueue_cli {

int schedule(const context& ctx, const schedule_args& args) {
  if (args.catch_up != "latest" && args.catch_up != "skip") {
    throw usage_error("--catch-up must be latest or skip, not '" + printable(args.catch_up) + "'");
  }
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    pgqueue::schedule s{.name = args.name,
                        .queue = args.queue,
                        .cron = args.cron,
                        .payload = args.payload,
                        .time_zone = args.time_zone,
                        .catch_up = args.catch_up == "skip"
                                        ? pgqueue::schedule::catch_up_policy::skip
                                        : pgqueue::schedule::catch_up_policy::latest,
                        .priority = args.priority,
                        .max_attempts = args.max_attempts};
    const bool changed = co_await pgqueue::declare_schedule(db, s);
    pgqueue::pg::params p{args.name};
    auto r =
        co_await db.query("SELECT next_slot FROM pgqueue.schedules WHERE name = $1", std::move(p));
    const auto next = r.get<std::string>(0, 0);
    if (ctx.json) {
      std::cout << nlohmann::json{{"changed", changed}, {"next_slot", next}}.dump() << "\n";
    } else {
      std::cout << (changed ? "scheduled " : "unchanged ") << printable(args.name) << ", next at "
                << next << "\n";
    }
    co_return exit_code::ok;
  });
}

int schedules(const context& ctx) {
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    auto r = co_await db.query(R"(
      SELECT name, queue, cron, time_zone, catch_up, next_slot, last_slot, last_job_id,
             priority, max_attempts, payload::text AS payload
        FROM pgqueue.schedules ORDER BY name)");
    print(std::cout, r, ctx.json, "last_job_id,priority,max_attempts,payload");
    co_return exit_code::ok;
  });
}

int unschedule(const context& ctx, const std::string& name) {
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    const bool removed = co_await pgqueue::remove_schedule(db, name);
    if (ctx.json) {
      std::cout << nlohmann::json{{"removed", removed}}.dump() << "\n";
    } else {
      std::cout << (removed ? "removed " : "no schedule ") << printable(name) << "\n";
    }
    co_return removed ? exit_code::ok : exit_code::answer_no;
  });
}

}  // namespace pgqueue_cli
