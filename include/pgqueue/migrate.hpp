// Installing or upgrading the pgqueue schema from C++.
#pragma once

#include <asio/awaitable.hpp>

#include "pgqueue/connect.hpp"
#include "pgqueue/detail/schema_sql.hpp"

namespace pgqueue {

/// The schema version this library needs and migrate() installs.
inline constexpr int schema_version = detail::schema_version;

/// Installs the pgqueue schema into the connected database, or upgrades an older one in place
/// keeping every job: the same text as sql/pgqueue.sql, in one transaction. Idempotent and safe
/// to run from several processes at once. One round trip (waits for requests already in flight
/// on the connection). Throws the server's error, e.g. SQLSTATE 55000 when the installed schema
/// is newer than this library.
inline asio::awaitable<void> migrate(database db) {
  co_await db.execute_script(detail::schema_sql);
}

}  // namespace pgqueue
