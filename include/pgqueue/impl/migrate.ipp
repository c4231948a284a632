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
  if (failure && (co_await asio::this_coro::cancellation_state).cancelled() !=
                     asio::cancellation_type::none) {
    // Cancelled: the script still runs at the server (it ends its transaction itself when it
    // succeeds), and the ROLLBACK for a script that fails goes out behind it, not awaited, so
    // the call returns at once. (Awaited, it waited for the script: 3.7 s for an upgrade
    // waiting on a lock.) Later requests on the connection queue behind both.
    asio::co_spawn(
        db.get_executor(),
        [](database d) -> asio::awaitable<void> {
          try {
            co_await d.execute_script("ROLLBACK");
          } catch (const std::exception&) {
          }
        }(db),
        asio::detached);
    std::rethrow_exception(failure);
  }
  if (failure) {
    // The script is one transaction block: a statement failing in it (e.g. 42501 for a role
    // that does not own the schema) leaves the session inside the aborted block, refusing
    // every later query. Ending it keeps the connection usable; on a lost connection this
    // fails too, and the original error is what matters.
    try {
      co_await db.execute_script("ROLLBACK");
    } catch (const error&) {
    }
    std::rethrow_exception(failure);
  }
}

}  // namespace pgqueue
