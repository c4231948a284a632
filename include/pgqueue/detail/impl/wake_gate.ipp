// Out-of-line definitions of pgqueue/detail/wake_gate.hpp: included at its end (header-only), or
// compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/detail/wake_gate.hpp"

namespace pgqueue::detail {

PGQUEUE_DECL std::shared_ptr<wake_gate> wake_gate::get(const std::string& key) {
  static std::mutex registry_mutex;
  static std::unordered_map<std::string, std::weak_ptr<wake_gate>> registry;
  std::lock_guard lock(registry_mutex);
  auto& slot = registry[key];
  if (auto gate = slot.lock()) return gate;
  std::erase_if(registry, [](const auto& entry) { return entry.second.expired(); });
  auto gate = std::make_shared<wake_gate>();
  registry[key] = gate;
  return gate;
}

PGQUEUE_DECL bool wake_gate::try_carry(clock::duration gap) {
  std::lock_guard lock(m_);
  const auto now = clock::now();
  if (state_ == state::sending || state_ == state::carrying || now < last_ + gap) return false;
  state_ = state::carrying;  // a waiting sender finds its round taken (see begin)
  pending_ = false;
  last_ = now;
  return true;
}

PGQUEUE_DECL std::uint64_t wake_gate::request() {
  std::lock_guard lock(m_);
  if (state_ != state::idle) {
    pending_ = true;
    return 0;
  }
  state_ = state::waiting;
  return ++ticket_;
}

PGQUEUE_DECL bool wake_gate::begin(std::uint64_t ticket) {
  std::lock_guard lock(m_);
  if (state_ != state::waiting || ticket != ticket_) return false;
  state_ = state::sending;
  pending_ = false;
  last_ = clock::now();
  return true;
}

PGQUEUE_DECL std::uint64_t wake_gate::finish(bool delivered) {
  std::lock_guard lock(m_);
  if (!delivered) pending_ = true;
  if (pending_) {
    state_ = state::waiting;
    return ++ticket_;
  }
  state_ = state::idle;
  return 0;
}

}  // namespace pgqueue::detail
