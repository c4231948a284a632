// Everything pgqueue offers, in one include.
#pragma once

#include "pgqueue/as_tuple.hpp"
#include "pgqueue/connect.hpp"
#include "pgqueue/enqueue_options.hpp"
#include "pgqueue/error.hpp"
#include "pgqueue/job.hpp"
#include "pgqueue/job_event.hpp"
#include "pgqueue/lease.hpp"
#include "pgqueue/metrics.hpp"
#include "pgqueue/migrate.hpp"
#include "pgqueue/queue.hpp"
#include "pgqueue/queue_options.hpp"
#include "pgqueue/queue_status.hpp"
#include "pgqueue/schedule.hpp"
#include "pgqueue/transaction.hpp"
#include "pgqueue/worker.hpp"
#include "pgqueue/worker_options.hpp"
