// Which subscriptions want which channel; decides when LISTEN/UNLISTEN are needed.
#pragma once

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pgqueue/detail/config.hpp"
#include "pgqueue/pg/detail/subscription_state.hpp"
#include "pgqueue/pg/notification.hpp"

namespace pgqueue::pg::detail {

/// Reference counts per channel: live subscriptions plus LISTENs still in flight. Kept apart
/// from the socket so that a reconnect can re-LISTEN `channels()` and keep the subscribers.
class channel_registry {
 public:
  void begin_listen(const std::string& channel) { ++entries_[channel].pending; }

  /// A LISTEN finished; `sub` is null when it failed or its caller gave up. Returns true when
  /// nobody wants the channel any more (the caller should UNLISTEN).
  bool end_listen(const std::string& channel, std::shared_ptr<subscription_state> sub);

  /// Returns true when `sub` was the last interest in its channel.
  bool remove(const std::shared_ptr<subscription_state>& sub) {
    auto it = entries_.find(sub->channel());
    if (it == entries_.end()) return false;
    std::erase(it->second.subs, sub);
    return erase_if_unused(it);
  }

  void dispatch(const notification& n) {
    auto it = entries_.find(n.channel);
    if (it == entries_.end()) return;
    for (auto& s : it->second.subs) s->deliver(n);
  }

  /// The channel is LISTENed again on a new session: its subscribers get the `reconnected`
  /// marker, since whatever was sent meanwhile is lost.
  void resynced(const std::string& channel) {
    auto it = entries_.find(channel);
    if (it == entries_.end()) return;
    for (auto& s : it->second.subs) s->deliver(notification{channel, "", 0, true});
  }

  /// The server refused to LISTEN again: the channel's subscriptions end with `e`.
  void fail_channel(const std::string& channel, const std::exception_ptr& e);

  void fail_all(std::exception_ptr e) {
    auto entries = std::exchange(entries_, {});
    for (auto& [name, entry] : entries) {
      for (auto& s : entry.subs) s->fail(e);
    }
  }

  std::vector<std::string> channels() const {
    std::vector<std::string> out;
    for (const auto& [name, entry] : entries_) out.push_back(name);
    return out;
  }

 private:
  struct entry {
    std::vector<std::shared_ptr<subscription_state>> subs;
    int pending = 0;
  };
  using map_type = std::map<std::string, entry, std::less<>>;

  bool erase_if_unused(map_type::iterator it) {
    if (it->second.pending > 0 || !it->second.subs.empty()) return false;
    entries_.erase(it);
    return true;
  }

  map_type entries_;
};

}  // namespace pgqueue::pg::detail

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/pg/detail/impl/channel_registry.ipp"
#endif
