// Talking to the server outside the code under test: per-scenario databases, bulk fills, and
// running a coroutine to completion on a private io_context.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <pgqueue/pgqueue.hpp>

#include "context.hpp"

namespace bench {

using clock = std::chrono::steady_clock;

inline double seconds_since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

/// CPU time (user + system, all threads) this process has used, in seconds.
inline double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/// The steady clock in nanoseconds (what timed jobs carry in their payload).
inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch())
      .count();
}

inline double ms_between(clock::time_point a, clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/// `dsn` with its database replaced by `db` (key=value strings and postgres:// URIs).
inline std::string with_dbname(const std::string& dsn, const std::string& db) {
  if (dsn.rfind("postgres://", 0) == 0 || dsn.rfind("postgresql://", 0) == 0) {
    return dsn + (dsn.find('?') == std::string::npos ? "?" : "&") + "dbname=" + db;
  }
  return dsn + " dbname=" + db;
}

/// Runs `f(executor)` (a coroutine) on a fresh single-threaded io_context until it is done;
/// returns its value or rethrows its exception.
template <class F>
auto run_async(F f) {
  using awaitable_t = std::invoke_result_t<F&, asio::any_io_executor>;
  using T = typename awaitable_t::value_type;
  asio::io_context io;
  std::exception_ptr failure;
  if constexpr (std::is_void_v<T>) {
    asio::co_spawn(io, f(io.get_executor()), [&](std::exception_ptr e) { failure = e; });
    io.run();
    if (failure) std::rethrow_exception(failure);
  } else {
    std::optional<T> out;
    asio::co_spawn(io, f(io.get_executor()), [&](std::exception_ptr e, T v) {
      failure = e;
      if (!e) out.emplace(std::move(v));
    });
    io.run();
    if (failure) std::rethrow_exception(failure);
    return std::move(*out);
  }
}

/// Runs every task to completion at once; rethrows the first failure after all have ended.
inline asio::awaitable<void> join_all(std::vector<asio::awaitable<void>> tasks) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer done(ex, asio::steady_timer::time_point::max());
  std::size_t remaining = tasks.size();
  std::exception_ptr first;
  for (auto& t : tasks) {
    asio::co_spawn(ex, std::move(t), [&](std::exception_ptr e) {
      if (e && !first) first = e;
      if (--remaining == 0) done.cancel();
    });
  }
  if (remaining > 0) {
    std::error_code ec;
    co_await done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (first) std::rethrow_exception(first);
}

/// Sleeps on the current executor.
inline asio::awaitable<void> sleep_for(std::chrono::steady_clock::duration d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

/// Creates database `name` (dropping a leftover one) and connects to it; with `install`, also
/// installs the pgqueue schema (pgqueue::migrate) and, with `patch`, runs `--after-migrate`.
inline asio::awaitable<pgqueue::database> fresh_database(const options& opt,
                                                         const std::string& name, bool install,
                                                         bool patch = true) {
  auto ex = co_await asio::this_coro::executor;
  auto admin = co_await pgqueue::connect(ex, opt.dsn);
  co_await admin.execute_script("DROP DATABASE IF EXISTS \"" + name + "\" WITH (FORCE)");
  co_await admin.execute_script("CREATE DATABASE \"" + name + "\"");
  admin.close();
  auto db = co_await pgqueue::connect(ex, with_dbname(opt.dsn, name));
  if (install) {
    co_await pgqueue::migrate(db);
    if (patch && !opt.after_migrate.empty()) co_await db.execute_script(opt.after_migrate);
  }
  co_return db;
}

inline asio::awaitable<void> drop_database(const options& opt, const std::string& name) {
  auto admin = co_await pgqueue::connect(co_await asio::this_coro::executor, opt.dsn);
  co_await admin.execute_script("DROP DATABASE IF EXISTS \"" + name + "\" WITH (FORCE)");
}

/// Brings the database to the same state before every timed run: fresh statistics and no
/// checkpoint due (CHECKPOINT needs superuser or pg_checkpoint; skipped without).
inline asio::awaitable<void> settle(const pgqueue::database& db) {
  co_await db.execute_script("VACUUM ANALYZE pgqueue.jobs");
  try {
    co_await db.execute_script("CHECKPOINT");
  } catch (const pgqueue::error&) {
  }
}

/// Adds `n` ready jobs to the bench queue (enqueue_batch in SQL, 10,000 per statement, no
/// wake-ups), then settles the database.
inline asio::awaitable<void> fill_ready(const pgqueue::database& db, long n) {
  for (long done = 0; done < n; done += 10000) {
    const long k = std::min(10000L, n - done);
    co_await db.query(
        "SELECT cardinality(pgqueue.enqueue_batch($1, ARRAY(SELECT $2::jsonb FROM "
        "generate_series(1, $3::int)), NULL, 0, now(), 5, false))",
        {bench_queue, bench_payload, k});
  }
  co_await settle(db);
}

/// Empties the queue tables (between cases of one scenario).
inline asio::awaitable<void> reset_jobs(const pgqueue::database& db) {
  co_await db.execute_script("TRUNCATE pgqueue.jobs, pgqueue.done_counts");
}

/// Jobs of the bench queue in `state` (counted from the table).
inline asio::awaitable<std::int64_t> count_jobs(const pgqueue::database& db,
                                                std::string_view state) {
  auto r = co_await db.query("SELECT count(*) FROM pgqueue.jobs WHERE state = $1", {state});
  co_return r.get<std::int64_t>(0, 0);
}

}  // namespace bench
