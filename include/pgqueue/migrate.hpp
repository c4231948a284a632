// Installing or upgrading the pgqueue schema from C++.
#pragma once

#include <exception>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/this_coro.hpp>

#include "pgqueue/connect.hpp"
#include "pgqueue/detail/config.hpp"
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
/// back as a whole) and the call throws operation_aborted at once, without waiting for it;
/// later requests on the connection go out behind it. Call it with no transaction open on the
/// connection: the script is a transaction of its own (BEGIN ... COMMIT), and a ROLLBACK ends it
/// after a failure or a cancel (also one cancelled before it was sent).
asio::awaitable<void> migrate(database db);

}  // namespace pgqueue

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/impl/migrate.ipp"
#endif
