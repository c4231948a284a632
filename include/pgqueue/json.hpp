// Typed payloads through nlohmann/json: enqueue any value that converts to JSON, read a job's
// payload as a type, and a worker handler that takes the payload converted. Optional: include
// it where it is used (pgqueue.hpp does not); it needs <nlohmann/json.hpp> (Debian:
// nlohmann-json3-dev) and nothing else beyond the queue's own headers.
#pragma once

#include <concepts>
#include <cstdint>
#include <exception>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "pgqueue/enqueue_options.hpp"
#include "pgqueue/error.hpp"
#include "pgqueue/job.hpp"
#include "pgqueue/lease.hpp"
#include "pgqueue/pg/transaction.hpp"
#include "pgqueue/queue.hpp"

namespace pgqueue {

namespace detail {

// How a json_payload is read.
template <class T>
using json_source = const std::remove_cvref_t<T>&;

// This function's signature, which names T: GCC "auto f() [with T = app::email]", Clang
// "auto f() [T = app::email]" (an `auto` return type adds no "; std::string = ..." to it).
template <class T>
auto json_type_signature() {
#if defined(__GNUC__) || defined(__clang__)
  return __PRETTY_FUNCTION__;
#else
  return "";
#endif
}

// The name of T as the compiler spells it ("app::email"), or "" where it is not known.
template <class T>
std::string json_type_name() {
  if constexpr (std::is_same_v<T, nlohmann::json>) return "nlohmann::json";
  const std::string_view f = json_type_signature<T>();
  const auto start = f.find("T = ");
  if (start == std::string_view::npos || !f.ends_with(']')) return {};
  return std::string(f.substr(start + 4, f.size() - 1 - (start + 4)));
}

// `value` as JSON text; throws errc::invalid_argument naming `what` when it does not convert
// (a to_json that throws, a string that is not UTF-8).
template <class T>
std::string to_json_text(const T& value, std::string_view what) {
  try {
    return nlohmann::json(value).dump();
  } catch (const std::exception& e) {
    throw error(errc::invalid_argument,
                std::string(what) + " does not convert to JSON; nothing was sent: " + e.what());
  }
}

// An awaitable that throws `e` when awaited: conversion errors reach the caller where the
// queue's own errors do, at the co_await. (Taken as an xvalue: GCC 12 destroys a coroutine
// parameter twice when it is initialised straight from a temporary.)
template <class R>
asio::awaitable<R> throw_when_awaited(error e) {
  throw e;
  co_return R{};
}

template <class R>
std::vector<std::string> to_json_texts(R&& values) {
  std::vector<std::string> texts;
  if constexpr (std::ranges::sized_range<R>) texts.reserve(std::ranges::size(values));
  for (auto&& v : values) {
    texts.push_back(to_json_text(v, "value " + std::to_string(texts.size()) + " of the batch"));
  }
  return texts;
}

}  // namespace detail

/// A value that converts to JSON: nlohmann::json itself, or any type nlohmann can serialise
/// (the standard containers, strings and numbers, and types with a `to_json`, e.g. from
/// NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE). Note a std::string is a JSON string, not JSON text:
/// enqueue JSON text with `queue::enqueue`.
template <class T>
concept json_payload = std::constructible_from<nlohmann::json, detail::json_source<T>>;

/// Adds a job whose payload is `value` as JSON, and returns its id: `queue::enqueue` with the
/// text nlohmann's dump() makes (at the call, with no round trip). One round trip, as
/// `enqueue`. Throws `errc::invalid_argument` when the value does not
/// convert (its to_json threw, or a string in it is not UTF-8; nothing is sent), and
/// otherwise as `enqueue`. Every error, conversion included, is thrown at the co_await.
template <json_payload T>
asio::awaitable<std::int64_t> enqueue_json(queue& q, const T& value, enqueue_options opts = {}) {
  std::string text;
  try {
    text = detail::to_json_text(value, "the value");
  } catch (error& e) {
    return detail::throw_when_awaited<std::int64_t>(std::move(e));
  }
  return q.enqueue(text, opts);
}

/// As `enqueue_json`, inside the application's transaction `tx` (see `queue::enqueue(tx, ...)`):
/// the job exists if and only if `tx` commits. One round trip on the transaction's session.
/// Throws as `enqueue_json` and as `queue::enqueue(tx, ...)`.
template <json_payload T>
asio::awaitable<std::int64_t> enqueue_json(queue& q, const pg::transaction& tx, const T& value,
                                           enqueue_options opts = {}) {
  std::string text;
  try {
    text = detail::to_json_text(value, "the value");
  } catch (error& e) {
    return detail::throw_when_awaited<std::int64_t>(std::move(e));
  }
  return q.enqueue(tx, text, opts);
}

namespace detail {

// Converts `values` to JSON texts and hands them to `send` (an enqueue_batch); a value that
// does not convert fails the returned awaitable instead, when awaited.
template <class R, class Send>
asio::awaitable<std::vector<std::int64_t>> with_json_texts(R&& values, Send send) {
  std::vector<std::string> texts;
  try {
    texts = to_json_texts(std::forward<R>(values));
  } catch (error& e) {
    return throw_when_awaited<std::vector<std::int64_t>>(std::move(e));
  }
  return send(std::move(texts));
}

}  // namespace detail

/// Adds one job per element of `values` (e.g. a std::vector of any `json_payload` type) in one
/// statement: `queue::enqueue_batch`, ids in input order; `opts` and `keys` as there. One round
/// trip. Throws `errc::invalid_argument` naming the element's index when one does not convert
/// (nothing is sent), and otherwise as `enqueue_batch`; every error at the co_await.
template <std::ranges::input_range R>
asio::awaitable<std::vector<std::int64_t>> enqueue_json_batch(
    queue& q, R&& values, enqueue_options opts = {},
    std::vector<std::optional<std::string>> keys = {}) {
  static_assert(json_payload<std::ranges::range_reference_t<R>>,
                "enqueue_json_batch: the elements do not convert to JSON (see json_payload)");
  return detail::with_json_texts(std::forward<R>(values), [&](std::vector<std::string> texts) {
    return q.enqueue_batch(std::move(texts), opts, std::move(keys));
  });
}

/// As `enqueue_json_batch`, inside `tx`: all the jobs exist if and only if `tx` commits. One
/// round trip on the transaction's session. Throws as `enqueue_json_batch` and as
/// `queue::enqueue_batch(tx, ...)`.
template <std::ranges::input_range R>
asio::awaitable<std::vector<std::int64_t>> enqueue_json_batch(
    queue& q, const pg::transaction& tx, R&& values, enqueue_options opts = {},
    std::vector<std::optional<std::string>> keys = {}) {
  static_assert(json_payload<std::ranges::range_reference_t<R>>,
                "enqueue_json_batch: the elements do not convert to JSON (see json_payload)");
  return detail::with_json_texts(std::forward<R>(values), [&](std::vector<std::string> texts) {
    return q.enqueue_batch(tx, std::move(texts), opts, std::move(keys));
  });
}

/// The job's payload as a `T` (nlohmann's `get<T>()`: a `from_json`, the standard types, or
/// nlohmann::json itself). No round trip: it parses the payload's text each call. Throws
/// `pg::errc::conversion_failed` when the payload does not convert (a missing key, a value of
/// another JSON type, a from_json that throws): the message names the job, the type and the
/// reason, e.g. "job 7: the payload does not convert to app::email:
/// [json.exception.out_of_range.403] key 'to' not found". The payload itself is not quoted.
template <class T>
T payload_as(const job& j) {
  static_assert(
      requires(const nlohmann::json& v) { v.template get<T>(); },
      "payload_as<T>: nlohmann/json cannot convert JSON to T (give T a from_json)");
  std::string reason;
  try {
    return nlohmann::json::parse(j.payload).template get<T>();
  } catch (const std::exception& e) {
    reason = e.what();
  } catch (...) {
    reason = "the conversion threw an exception that is not a std::exception";
  }
  auto type = detail::json_type_name<T>();
  throw error(pg::errc::conversion_failed,
              "job " + std::to_string(j.id) + ": the payload does not convert to " +
                  (type.empty() ? std::string("the requested type") : type) + ": " + reason);
}

/// A worker handler that converts each job's payload (`payload_as<T>`) and calls `f` with the
/// worker's arguments followed by the payload: see `with_payload`.
template <class T, class F>
class payload_handler {
 public:
  explicit payload_handler(F f) : f_(std::move(f)) {}

  /// `co_await f(lease, payload)`.
  asio::awaitable<void> operator()(lease& l) requires std::invocable<F&, lease&, T> {
    T payload = payload_as<T>(l.job());
    auto op = f_(l, std::move(payload));
    co_await std::move(op);
  }

  /// `co_await f(job, payload)`.
  asio::awaitable<void> operator()(const job& j) requires std::invocable<F&, const job&, T> {
    T payload = payload_as<T>(j);
    auto op = f_(j, std::move(payload));
    co_await std::move(op);
  }

  /// `co_await f(job, tx, payload)` (a transactional handler).
  asio::awaitable<void> operator()(const job& j, pg::transaction& tx) requires
      std::invocable<F&, const job&, pg::transaction&, T> {
    T payload = payload_as<T>(j);
    auto op = f_(j, tx, std::move(payload));
    co_await std::move(op);
  }

 private:
  F f_;
};

/// Makes `f` a worker handler that receives the job's payload as a `T`: `f` takes what a
/// worker handler takes, then the payload (by value, `const T&` or `T&&`), and returns an
/// `asio::awaitable<void>`: `f(const job&, T)`, `f(lease&, T)`, or, for a queue opened on a
/// pool, `f(const job&, pgqueue::transaction&, T)`. No round trip of its own: each job's
/// payload is parsed once per call. A payload that does not convert fails the job as a
/// throwing handler does: the worker nacks it with payload_as's message (kept in
/// `last_error`), and `f` is not called. Such a job fails the same way at every attempt: it
/// ends `dead` after `max_attempts`.
template <class T, class F>
payload_handler<T, std::decay_t<F>> with_payload(F&& f) {
  static_assert(std::invocable<std::decay_t<F>&, const job&, T> ||
                    std::invocable<std::decay_t<F>&, lease&, T> ||
                    std::invocable<std::decay_t<F>&, const job&, pg::transaction&, T>,
                "with_payload<T>(f): f takes (const pgqueue::job&, T), (pgqueue::lease&, T) or "
                "(const pgqueue::job&, pgqueue::transaction&, T)");
  return payload_handler<T, std::decay_t<F>>(std::forward<F>(f));
}

}  // namespace pgqueue
