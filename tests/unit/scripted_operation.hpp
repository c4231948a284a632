// An operation (what the connection completes when a request or a wait ends) for unit tests
// that drive the deciding parts with scripted events: its handler runs on `io` when the test
// polls it, as a coroutine's handler runs on its own executor.
#pragma once

#include <memory>
#include <utility>

#include <asio/any_io_executor.hpp>
#include <asio/bind_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <pgqueue/pg/detail/operation.hpp>

namespace unit_support {

template <class T, class Handler>
std::shared_ptr<pgqueue::pg::detail::operation<T>> scripted_operation(asio::io_context& io,
                                                                      Handler handler) {
  return std::make_shared<pgqueue::pg::detail::operation<T>>(
      asio::bind_executor(io.get_executor(), std::move(handler)),
      asio::make_strand(asio::any_io_executor(io.get_executor())));
}

}  // namespace unit_support
