// What the copies of one queue handle share.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "pgqueue/connect.hpp"
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
  bool wake_in_flight = false;              // a pgqueue.wake() is on its way
  bool wake_again = false;                  // another enqueue committed meanwhile
};

}  // namespace pgqueue::detail
