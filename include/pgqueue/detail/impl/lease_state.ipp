// Out-of-line definitions of pgqueue/detail/lease_state.hpp: included at its end (header-only), or
// compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/detail/lease_state.hpp"

namespace pgqueue::detail {

PGQUEUE_DECL auto lease_state::fence_of(const std::vector<std::shared_ptr<lease_state>>& states)
    -> fence {
  fence f;
  f.ids.reserve(states.size());
  f.tokens.reserve(states.size());
  for (const auto& s : states) {
    f.ids.push_back(s->the_job.id);
    f.tokens.push_back(s->token);
  }
  return f;
}

PGQUEUE_DECL asio::awaitable<pg::result> lease_state::settle(
    std::string_view sql, pg::params args, bool* repeated,
    const std::vector<std::shared_ptr<lease_state>>* batch) {
  auto valid_until = [&] {
    auto until = expires.load();
    if (batch) {
      for (const auto& s : *batch) until = std::max(until, s->expires.load());
    }
    return until;
  };
  for (int tries = 1;; ++tries) {
    try {
      co_return co_await db.query_prepared(sql, args);
    } catch (const pg::error& e) {
      if (!connection_fault(e) || !db.is_open() ||
          (tries >= 3 && std::chrono::steady_clock::now() >= valid_until())) {
        throw;
      }
    }
    *repeated = true;
    asio::steady_timer pause(db.get_executor(), retry_delay());
    std::error_code ec;
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

PGQUEUE_DECL asio::awaitable<lease_state::beat_outcome> lease_state::beat(
    std::shared_ptr<lease_state> self) {
  try {
    auto r = co_await self->db.query_prepared(
        "SELECT pgqueue.heartbeat($1, $2, $3::interval, $4)",
        {self->the_job.id, self->worker_id, interval(self->lease_for), self->token});
    co_return r.get<bool>(0, 0) ? beat_outcome::extended : beat_outcome::refused;
  } catch (const std::exception&) {
    co_return beat_outcome::failed;
  }
}

PGQUEUE_DECL asio::awaitable<void> lease_state::heartbeat_loop(std::shared_ptr<lease_state> self) {
  struct ended {
    lease_state& s;
    ~ended() { s.beating = false; }
  } on_end{*self};
  using namespace asio::experimental::awaitable_operators;
  auto wait = self->heartbeat_every;
  while (!self->finished) {
    self->timer.expires_after(wait);
    std::error_code ec;
    co_await self->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (self->finished) break;
    const auto sent = std::chrono::steady_clock::now();
    if (sent >= self->expires.load()) {
      self->mark_lost();
      break;
    }
    asio::steady_timer expiry(self->db.get_executor(), self->expires.load());
    std::error_code expiry_ec;
    auto outcome = co_await (
        beat(self) || expiry.async_wait(asio::redirect_error(asio::use_awaitable, expiry_ec)));
    if (self->finished) break;
    if (outcome.index() == 1) {  // no answer before the lease ran out
      self->mark_lost();
      break;
    }
    switch (std::get<0>(outcome)) {
      case beat_outcome::extended:
        self->expires.store(sent + self->lease_for);  // the server counted from later
        wait = self->heartbeat_every;
        break;
      case beat_outcome::refused:
        self->mark_lost();
        co_return;
      case beat_outcome::failed:
        wait = self->retry_delay();
        break;
    }
  }
}

}  // namespace pgqueue::detail
