// Out-of-line definitions of pgqueue/pg/detail/context_shutdown.hpp: included at its end
// (header-only), or compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/pg/detail/context_shutdown.hpp"

namespace pgqueue::pg::detail {

PGQUEUE_DECL void context_shutdown::shutdown() {
  std::unordered_map<const void*, std::function<void()>> closers;
  {
    std::lock_guard<std::mutex> lock(registry_->mutex);
    registry_->shut_down = true;
    closers = std::exchange(registry_->on_shutdown, {});
  }
  // No handler runs any more (the context's run() has returned on every thread).
  for (auto& [key, close] : closers) close();
}

}  // namespace pgqueue::pg::detail
