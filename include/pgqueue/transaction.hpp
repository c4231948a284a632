// Transactions of the application's own, on a pool of sessions: the pg layer's pool and
// transaction under the names a queue's user reaches for.
#pragma once

#include "pgqueue/pg/pool.hpp"
#include "pgqueue/pg/transaction.hpp"
#include "pgqueue/pg/transaction_options.hpp"

namespace pgqueue {

using pg::in_transaction;
using pg::isolation;
using pg::pool;
using pg::pool_options;
using pg::pooled_connection;
using pg::transaction;
using pg::transaction_options;

}  // namespace pgqueue
