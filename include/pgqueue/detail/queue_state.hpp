// What the copies of one queue handle share.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "pgqueue/connect.hpp"
#include "pgqueue/detail/wake_gate.hpp"
#include "pgqueue/pg/subscription.hpp"
#include "pgqueue/queue_options.hpp"

namespace pgqueue::detail {

struct queue_state {
  database db;
  std::string name;
  queue_options options;                    // options.worker_id points at worker_id below
  std::string worker_id;
  std::string channel;                      // pgqueue.channel(name), fetched once
  std::optional<pg::subscription> watcher;  // next_notification()'s subscription
  std::atomic<std::shared_ptr<wake_gate>> wake;  // the queue's process-wide wake-up gate
};

}  // namespace pgqueue::detail
