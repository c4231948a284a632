// Convenience header: the whole pgqueue::pg layer.
#pragma once

#include "pgqueue/pg/connection.hpp"
#include "pgqueue/pg/error.hpp"
#include "pgqueue/pg/notification.hpp"
#include "pgqueue/pg/params.hpp"
#include "pgqueue/pg/pool.hpp"
#include "pgqueue/pg/pool_options.hpp"
#include "pgqueue/pg/result.hpp"
#include "pgqueue/pg/subscription.hpp"
#include "pgqueue/pg/transaction.hpp"
#include "pgqueue/pg/transaction_options.hpp"
