// Ends a context's connections when the context shuts down (an io_context being destroyed).
//
// A coroutine suspended in a request keeps its connection alive through the handle in its
// frame, and the connection keeps the frame through the request's handler: a cycle that Asio's
// own shutdown (which destroys the handlers in its queues) cannot see, since the handler waits
// in the connection's queue. This service, one per execution context, closes each live
// connection when the context shuts down; their pending handlers are then posted and destroyed
// with the context's other handlers, which breaks the cycles. Services shut down newest first,
// so this runs before the scheduler and strands drop their queues.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include <asio/execution_context.hpp>

namespace pgqueue::pg::detail {

class context_shutdown : public asio::execution_context::service {
 public:
  using key_type = context_shutdown;
  inline static asio::execution_context::id id;

  // The part that outlives the service: a connection may be destroyed after its context.
  struct registry {
    std::mutex mutex;
    bool shut_down = false;
    std::unordered_map<const void*, std::function<void()>> on_shutdown;
  };

  explicit context_shutdown(asio::execution_context& ctx)
      : asio::execution_context::service(ctx), registry_(std::make_shared<registry>()) {}

  const std::shared_ptr<registry>& shared_registry() const noexcept { return registry_; }

  /// Registers `close` (run once, when the context shuts down) under `key`. Returns false if
  /// the context has already shut down. Any thread.
  static bool add(registry& r, const void* key, std::function<void()> close) {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.shut_down) return false;
    r.on_shutdown.emplace(key, std::move(close));
    return true;
  }

  static void remove(registry& r, const void* key) {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.on_shutdown.erase(key);
  }

 private:
  void shutdown() override;

  std::shared_ptr<registry> registry_;
};

}  // namespace pgqueue::pg::detail

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/detail/config.hpp"
#include "pgqueue/pg/detail/impl/context_shutdown.ipp"
#endif
