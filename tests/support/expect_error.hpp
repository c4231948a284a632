// Awaiting an operation that must fail: the error it throws, for the test to check.
#pragma once

#include <stdexcept>

#include <asio/awaitable.hpp>
#include <catch2/catch.hpp>
#include <pgqueue/pg/error.hpp>

namespace pgq_test {

/// Awaits `op`, which must throw a pgqueue error (pg::error); returns it (fails the test
/// otherwise).
template <class T>
asio::awaitable<pgqueue::pg::error> expect_error(asio::awaitable<T> op) {
  try {
    co_await std::move(op);
  } catch (const pgqueue::pg::error& e) {
    co_return e;
  }
  FAIL("expected a pg::error");
  throw std::logic_error("unreachable");
}

}  // namespace pgq_test
