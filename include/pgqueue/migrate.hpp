// Installing or upgrading the pgqueue schema from C++.
#pragma once

#include <exception>

#include <asio/awaitable.hpp>
#include <asio/this_coro.hpp>

#include "pgqueue/connect.hpp"
#include "pgqueue/detail/schema_sql.hpp"
#include "pgqueue/error.hpp"

namespace pgqueue {

/// The schema version this library needs and migrate() installs.
inline constexpr int schema_version = detail::schema_version;

/// Installs the pgqueue schema into the connected database, or upgrades an older one in place
/// keeping every job: the same text as sql/pgqueue.sql, in one transaction. Idempotent and safe
/// to run from several processes at once. One round trip (waits for requests already in flight
/// on the connection). Throws the server's error, e.g. SQLSTATE 55000 when the installed schema
/// is newer than this library, or 42501 for a role that may not change the schema. After a
/// failure nothing is changed and the connection is usable. Cancellation: before the script
/// is sent nothing happens; after, the server still runs it to its end (installed, or rolled
/// back as a whole) and the call throws operation_aborted without waiting.
inline asio::awaitable<void> migrate(database db) {
  std::exception_ptr failure;
  try {
    co_await db.execute_script(detail::schema_sql);
  } catch (const error&) {
    failure = std::current_exception();
  }
  if (failure) {
    // The script is one transaction block: a statement failing in it (e.g. 42501 for a role
    // that does not own the schema) leaves the session inside the aborted block, refusing
    // every later query. Ending it keeps the connection usable; on a lost connection this
    // fails too, and the original error is what matters. Also when the caller was cancelled
    // (the script's answer then was not awaited): Asio would refuse any await from here on,
    // so that check is off for the ROLLBACK and restored after it.
    const bool refuse_if_cancelled = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    try {
      co_await db.execute_script("ROLLBACK");
    } catch (const error&) {
    }
    co_await asio::this_coro::throw_if_cancelled(refuse_if_cancelled);
    std::rethrow_exception(failure);
  }
}

}  // namespace pgqueue
