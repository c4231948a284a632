// Out-of-line definitions of pgqueue/migrate.hpp: included at its end (header-only), or compiled
// once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/migrate.hpp"

namespace pgqueue {

PGQUEUE_DECL asio::awaitable<void> migrate(database db) {
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
