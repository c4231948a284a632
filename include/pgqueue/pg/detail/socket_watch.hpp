// Readiness waits on a socket that libpq owns.
#pragma once

#include <poll.h>

#include <asio/posix/stream_descriptor.hpp>
#include <system_error>
#include <utility>

#include "pgqueue/pg/detail/operation.hpp"

namespace pgqueue::pg::detail {

/// Wraps libpq's socket in an Asio descriptor for waiting only; libpq does all I/O and closing.
///
/// Asio's epoll reactor is edge-triggered and drops an edge that arrives while no wait is queued,
/// so callers arm a wait first and then ask `ready_now()`; anything that arrived before the
/// wait was queued is seen by the check, anything after it completes the wait.
class socket_watch {
 public:
  explicit socket_watch(const strand_type& strand) : descriptor_(strand) {}
  socket_watch(const socket_watch&) = delete;
  socket_watch& operator=(const socket_watch&) = delete;
  ~socket_watch() { release(); }

  /// Starts watching `fd` (after releasing any previous one). Throws std::system_error.
  void assign(int fd) {
    release();
    descriptor_.assign(fd);
  }

  /// Stops watching without closing: the fd belongs to libpq. Pending waits finish with
  /// operation_aborted.
  void release() noexcept {
    if (descriptor_.is_open()) descriptor_.release();
  }

  bool is_open() const noexcept { return descriptor_.is_open(); }
  int native_handle() noexcept { return descriptor_.native_handle(); }

  template <class Handler>
  void async_wait(asio::posix::descriptor_base::wait_type type, Handler&& handler) {
    descriptor_.async_wait(type, std::forward<Handler>(handler));
  }

  /// Non-blocking poll(2) of the socket: which of POLLIN/POLLOUT (plus POLLERR/POLLHUP) hold now.
  short ready_now(bool want_write) noexcept {
    if (!descriptor_.is_open()) return 0;
    pollfd p{descriptor_.native_handle(), static_cast<short>(POLLIN | (want_write ? POLLOUT : 0)),
             0};
    return ::poll(&p, 1, 0) > 0 ? p.revents : 0;
  }

 private:
  asio::posix::stream_descriptor descriptor_;
};

}  // namespace pgqueue::pg::detail
