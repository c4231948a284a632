// A pending asynchronous operation whose completion handler type has been erased, so the
// connection's state machine can queue heterogeneous waiters and finish them later.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/dispatch.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "pgqueue/pg/error.hpp"

namespace pgqueue::pg::detail {

using strand_type = asio::strand<asio::any_io_executor>;

inline std::exception_ptr make_error(std::error_code code, std::string message) {
  return std::make_exception_ptr(error(code, std::move(message)));
}

inline std::exception_ptr aborted_error() {
  return make_error(asio::error::operation_aborted, "operation cancelled");
}

template <class T>
class handler_base {
 public:
  virtual ~handler_base() = default;
  virtual void invoke(std::exception_ptr e, T value) = 0;
};

template <class T, class Handler>
class handler_holder final : public handler_base<T> {
 public:
  handler_holder(Handler h, const strand_type& fallback)
      : handler_(std::move(h)),
        work_(asio::make_work_guard(asio::get_associated_executor(handler_, fallback))) {}

  void invoke(std::exception_ptr e, T value) override {
    auto ex = work_.get_executor();
    // Always post: the handler resumes user code, which must not run inside the reader's loop.
    asio::post(
        ex, [h = std::move(handler_), e, v = std::move(value), work = std::move(work_)]() mutable {
          // The slot belongs to the caller's context, so it is cleared there, just before resuming.
          asio::get_associated_cancellation_slot(h).clear();
          std::move(h)(e, std::move(v));
        });
  }

 private:
  Handler handler_;
  asio::executor_work_guard<asio::associated_executor_t<Handler, strand_type>> work_;
};

/// One waiter, touched only on the connection's strand. Completing it twice is a no-op, so a
/// cancellation and a real completion may race without care at the call sites.
template <class T>
class operation {
 public:
  template <class Handler>
  operation(Handler h, const strand_type& strand)
      : handler_(std::make_unique<handler_holder<T, Handler>>(std::move(h), strand)) {}

  /// True once the handler has been handed its outcome (normally or by cancellation).
  bool done() const noexcept { return handler_ == nullptr; }

  void complete(std::exception_ptr e, T value = T{}) {
    if (auto h = std::move(handler_)) h->invoke(std::move(e), std::move(value));
  }

  /// Run when the caller cancels (after the handler got operation_aborted), e.g. to stop work
  /// that only this operation wanted.
  void on_cancel(std::function<void()> hook) { cancel_hook_ = std::move(hook); }

  /// Makes a cancellation ignored once the request was sent (see pg::cancel_until_sent).
  void keep_once_sent() noexcept { keep_once_sent_ = true; }
  /// The connection has written the request: the server may run it from now on.
  void mark_sent() noexcept { sent_ = true; }

  void cancel() {
    if (done() || (keep_once_sent_ && sent_)) return;
    complete(aborted_error());
    if (auto hook = std::exchange(cancel_hook_, nullptr)) hook();
  }

 private:
  std::unique_ptr<handler_base<T>> handler_;
  std::function<void()> cancel_hook_;
  bool keep_once_sent_ = false;
  bool sent_ = false;
};

template <class T>
using operation_ptr = std::shared_ptr<operation<T>>;

template <class T>
class canceller {
 public:
  canceller(std::weak_ptr<operation<T>> op, strand_type strand)
      : op_(std::move(op)), strand_(std::move(strand)) {}

  void operator()(asio::cancellation_type_t type) {
    if (type == asio::cancellation_type::none) return;
    // Emitted in the caller's context; the operation itself lives on the strand.
    asio::post(strand_, [op = op_] {
      if (auto p = op.lock()) p->cancel();
    });
  }

 private:
  std::weak_ptr<operation<T>> op_;
  strand_type strand_;
};

/// Starts an operation completing with `void(std::exception_ptr, T)`: `start(op)` runs on the
/// strand (unless cancelled first) and must arrange for `op->complete(...)` eventually.
/// With `keep_once_sent`, a cancellation that comes after the connection sent the request is
/// ignored (the caller gets the answer).
template <class T, class Token, class Start>
auto async_start(const strand_type& strand, Start start, Token&& token,
                 bool keep_once_sent = false) {
  return asio::async_initiate<Token, void(std::exception_ptr, T)>(
      [keep_once_sent](auto handler, strand_type strand, Start start) {
        auto slot = asio::get_associated_cancellation_slot(handler);
        auto op = std::make_shared<operation<T>>(std::move(handler), strand);
        if (keep_once_sent) op->keep_once_sent();
        if (slot.is_connected()) slot.template emplace<canceller<T>>(op, strand);
        // Dispatched: on a thread that runs the strand's context while the strand is free, the
        // request goes out now rather than after a turn of the event loop (a turn costs the
        // reactor a system call). The caller is suspended by then, and its handler is posted.
        asio::dispatch(strand, [op, start = std::move(start)]() mutable {
          if (!op->done()) start(op);
        });
      },
      token, strand, std::move(start));
}

/// An awaitable that fails with `e` when awaited (for calls on an empty handle), so errors
/// always surface at the co_await rather than at the call.
template <class T>
asio::awaitable<T> fail_awaitable(std::exception_ptr e) {
  std::rethrow_exception(std::move(e));
  co_return T{};
}

}  // namespace pgqueue::pg::detail
