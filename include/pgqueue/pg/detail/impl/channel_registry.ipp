// Out-of-line definitions of pgqueue/pg/detail/channel_registry.hpp: included at its end
// (header-only), or compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/pg/detail/channel_registry.hpp"

namespace pgqueue::pg::detail {

PGQUEUE_DECL bool channel_registry::end_listen(const std::string& channel,
                                               std::shared_ptr<subscription_state> sub) {
  auto it = entries_.find(channel);
  if (it == entries_.end()) return false;
  --it->second.pending;
  if (sub) it->second.subs.push_back(std::move(sub));
  return erase_if_unused(it);
}

PGQUEUE_DECL void channel_registry::fail_channel(const std::string& channel,
                                                 const std::exception_ptr& e) {
  auto it = entries_.find(channel);
  if (it == entries_.end()) return;
  auto subs = std::move(it->second.subs);
  it->second.subs.clear();
  erase_if_unused(it);
  for (auto& s : subs) s->fail(e);
}

}  // namespace pgqueue::pg::detail
