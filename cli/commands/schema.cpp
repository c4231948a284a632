// pgqueue migrate [--check], grant-producer ROLE, grant-worker ROLE.
#include <iostream>

#include <nlohmann/json.hpp>

#include "../commands.hpp"
#include "../output.hpp"

namespace pgqueue_cli {

namespace {

// The installed schema's version: 0 = none, 1 = the seed design (a jobs table, no version
// table), else pgqueue.schema_version. One or two round trips (a query cannot name a table
// that may not exist).
asio::awaitable<int> installed_version(pgqueue::database& db) {
  auto tables = co_await db.query(
      "SELECT to_regclass('pgqueue.schema_version') IS NOT NULL, "
      "to_regclass('pgqueue.jobs') IS NOT NULL");
  if (!tables.get<bool>(0, 0)) co_return tables.get<bool>(0, 1) ? 1 : 0;
  auto r = co_await db.query("SELECT max(version) FROM pgqueue.schema_version");
  co_return r.is_null(0, 0) ? 0 : r.get<int>(0, 0);
}

}  // namespace

// The advisory lock sql/pgqueue.sql serialises installs on (its transaction takes it). Held by
// `migrate` for the session from before it reads the installed version, so that a run that
// waited for another one reports what it found then, not the version from before the other
// one installed. (The script takes it again in its transaction: the same session may.)
constexpr const char* install_lock = "8100266002545501541";

int migrate(const context& ctx, bool check_only) {
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    if (!check_only) co_await db.query("SELECT pg_advisory_lock($1::bigint)", {install_lock});
    const int before = co_await installed_version(db);
    if (check_only) {
      const bool pending = before < pgqueue::schema_version;
      if (ctx.json) {
        nlohmann::json out{
            {"installed", before}, {"available", pgqueue::schema_version}, {"pending", pending}};
        std::cout << out.dump() << "\n";
      } else if (pending) {
        std::cout << "upgrade pending: installed version " << before << ", this tool installs "
                  << pgqueue::schema_version << "\n";
      } else {
        std::cout << "up to date: version " << before << "\n";
      }
      co_return pending ? exit_code::answer_no : exit_code::ok;
    }
    co_await pgqueue::migrate(db);  // (a failure ends the session, and the lock with it)
    co_await db.query("SELECT pg_advisory_unlock($1::bigint)", {install_lock});
    if (ctx.json) {
      std::cout << nlohmann::json{{"from", before}, {"to", pgqueue::schema_version}}.dump() << "\n";
    } else if (before == pgqueue::schema_version) {
      std::cout << "up to date: version " << before << "\n";
    } else {
      std::cout << "migrated: version " << before << " -> " << pgqueue::schema_version << "\n";
    }
    co_return exit_code::ok;
  });
}

int grant(const context& ctx, const std::string& role, bool worker) {
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    // The role's name as given (quote_ident: 'App' is the role App, not app).
    co_await db.query(worker ? "SELECT pgqueue.grant_worker(quote_ident($1)::regrole)"
                             : "SELECT pgqueue.grant_producer(quote_ident($1)::regrole)",
                      {role});
    if (ctx.json) {
      nlohmann::json out{{"role", role}, {"granted", worker ? "worker" : "producer"}};
      std::cout << out.dump() << "\n";
    } else {
      std::cout << "granted " << (worker ? "worker" : "producer") << " access to "
                << printable(role) << "\n";
    }
    co_return exit_code::ok;
  });
}

}  // namespace pgqueue_cli
