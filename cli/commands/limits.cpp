// pgqueue limit, limits: fleet-wide concurrency and rate limits per queue (pgqueue.queue_limits).
#include <iostream>

#include <nlohmann/json.hpp>

#include "../commands.hpp"
#include "../output.hpp"

namespace pgqueue_cli {

int limit(const context& ctx, const limit_args& args) {
  if (args.none == (args.concurrency || args.rate)) {
    throw usage_error(args.none ? "--none removes the limits: give no other limit with it"
                                : "give --concurrency N, --rate N (with --per), or --none");
  }
  if (args.burst && !args.rate) throw usage_error("--burst needs --rate");
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    // The period as PostgreSQL reads an interval ('1 second', '5 min', '00:01:00').
    pgqueue::pg::params p{args.queue, args.concurrency, args.rate, args.per, args.burst};
    auto r = co_await db.query("SELECT pgqueue.set_queue_limits($1, $2, $3, $4::interval, $5)",
                               std::move(p));
    const bool changed = r.get<bool>(0, 0);
    if (ctx.json) {
      std::cout << nlohmann::json{{"changed", changed}}.dump() << "\n";
    } else {
      std::cout << (changed ? (args.none ? "removed the limits of " : "limited ") : "unchanged ")
                << printable(args.queue) << "\n";
    }
    co_return exit_code::ok;
  });
}

int limits(const context& ctx) {
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    auto r = co_await db.query(R"(
      SELECT queue, max_claimed, claimed, rate, rate_period::text AS per, burst,
             round(tokens::numeric, 2) AS tokens
        FROM pgqueue.limits())");
    print(std::cout, r, ctx.json, "max_claimed,claimed,rate,burst,tokens");
    co_return exit_code::ok;
  });
}

}  // namespace pgqueue_cli
