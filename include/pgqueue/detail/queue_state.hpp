// What the copies of one queue handle share.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "pgqueue/connect.hpp"
#include "pgqueue/detail/wake_gate.hpp"
#include "pgqueue/pg/pool.hpp"
#include "pgqueue/pg/subscription.hpp"
#include "pgqueue/queue_options.hpp"

namespace pgqueue::detail {

struct queue_state {
  database db;
  pg::pool sessions;  // queue::open(pool, ...): db is its shared session
  std::string name;
  queue_options options;  // options.worker_id points at worker_id below
  std::string worker_id;
  std::string channel;                      // pgqueue.channel(name), fetched once
  std::optional<pg::subscription> watcher;  // next_notification()'s subscription
  // The queue's process-wide wake-up gate, once known. A mutex rather than
  // std::atomic<std::shared_ptr>: libstdc++ 12 guards that with a lock bit ThreadSanitizer
  // does not see, and it reported a race between the store and enqueues' loads.
  struct gate_slot {
    std::shared_ptr<wake_gate> load() const {
      std::lock_guard<std::mutex> lock(mutex);
      return gate;
    }
    void store(std::shared_ptr<wake_gate> g) {
      std::lock_guard<std::mutex> lock(mutex);
      gate = std::move(g);
    }
    mutable std::mutex mutex;
    std::shared_ptr<wake_gate> gate;
  } wake;
};

}  // namespace pgqueue::detail
