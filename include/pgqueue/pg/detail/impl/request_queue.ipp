// Out-of-line definitions of pgqueue/pg/detail/request_queue.hpp: included at its end
// (header-only), or compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/pg/detail/request_queue.hpp"

namespace pgqueue::pg::detail {

PGQUEUE_DECL request* request_queue::next_to_send(bool script_running) {
  while (!script_running && !unsent_.empty()) {
    request& r = *unsent_.front();
    if (r.abandoned()) {
      take(unsent_)->finish();
      continue;
    }
    if (r.type == request::kind::script && !sent_.empty()) return nullptr;
    return &r;
  }
  return nullptr;
}

PGQUEUE_DECL void request_queue::drop(const std::exception_ptr& sent_error,
                                      std::optional<clock::time_point> wait_until,
                                      const std::exception_ptr& unsent_error) {
  // Stamped before anything below can push more: those wait as long as the rest.
  if (wait_until) {
    for (auto& r : unsent_) r->deadline = *wait_until;
  }
  auto sent = std::exchange(sent_, {});
  for (auto& r : sent) r->fail(sent_error);
  if (!wait_until) fail_all_unsent(unsent_error);
}

PGQUEUE_DECL std::size_t request_queue::expire(clock::time_point now,
                                               const std::function<std::exception_ptr()>& why) {
  std::deque<request_ptr> expired, keep;
  for (auto& r : unsent_) (r->deadline <= now ? expired : keep).push_back(std::move(r));
  unsent_ = std::move(keep);
  if (expired.empty()) return 0;
  auto e = why();
  for (auto& r : expired) r->fail(e);
  return expired.size();
}

}  // namespace pgqueue::pg::detail
