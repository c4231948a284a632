// Compiles the whole library once: include this in exactly one .cpp file of a program built
// with PGQUEUE_SEPARATE_COMPILATION defined everywhere (as Asio's asio/impl/src.hpp). Every
// other translation unit then sees declarations only and compiles several times faster.
#pragma once

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#error "pgqueue/src.hpp is for PGQUEUE_SEPARATE_COMPILATION builds: define it for every file"
#endif

// GCC warns that a coroutine defined in a header (the .ipp files below) has a frame holding a
// lambda's type, which has no linkage. The frames live in this one file: nothing to warn about.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsubobject-linkage"
#endif

#include "pgqueue/detail/impl/lease_state.ipp"
#include "pgqueue/detail/impl/shield.ipp"
#include "pgqueue/detail/impl/wake_gate.ipp"
#include "pgqueue/impl/lease.ipp"
#include "pgqueue/impl/metrics.ipp"
#include "pgqueue/impl/migrate.ipp"
#include "pgqueue/impl/queue.ipp"
#include "pgqueue/impl/queue_limits.ipp"
#include "pgqueue/impl/queue_status.ipp"
#include "pgqueue/impl/schedule.ipp"
#include "pgqueue/impl/worker.ipp"
#include "pgqueue/pg/detail/impl/channel_registry.ipp"
#include "pgqueue/pg/detail/impl/connection_impl.ipp"
#include "pgqueue/pg/detail/impl/connector.ipp"
#include "pgqueue/pg/detail/impl/context_shutdown.ipp"
#include "pgqueue/pg/detail/impl/request.ipp"
#include "pgqueue/pg/detail/impl/request_queue.ipp"
#include "pgqueue/pg/detail/impl/secrets.ipp"
#include "pgqueue/pg/detail/impl/subscription_state.ipp"
#include "pgqueue/pg/impl/connection.ipp"
#include "pgqueue/pg/impl/pool.ipp"
#include "pgqueue/pg/impl/subscription.ipp"
#include "pgqueue/pg/impl/transaction.ipp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
