// One unit of work for the connection: a pipelined statement or a simple-protocol script.
#pragma once

#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "pgqueue/detail/config.hpp"
#include "pgqueue/pg/detail/libpq_handles.hpp"
#include "pgqueue/pg/detail/operation.hpp"
#include "pgqueue/pg/detail/server_error.hpp"
#include "pgqueue/pg/params.hpp"
#include "pgqueue/pg/result.hpp"

namespace pgqueue::pg::detail {

struct request {
  enum class kind { statement, script };

  kind type = kind::statement;
  std::string sql;
  params args;
  /// Run as a prepared statement of the session (parsed and planned once per session).
  bool prepared = false;
  /// The prepared statement's name it was sent with.
  std::string statement;
  /// Null for fire-and-forget work (UNLISTEN). A done op means the caller gave up: results
  /// are still read, to keep the pipeline in step, and then dropped.
  operation_ptr<result> op;
  /// Runs on the strand before the caller is resumed; told the failure (null on success) and
  /// whether the caller is still waiting.
  std::function<void(const std::exception_ptr& failure, bool abandoned)> on_finish;
  /// While reconnecting: when a request not yet sent gives up waiting for the new session.
  std::chrono::steady_clock::time_point deadline{};
  /// The connection's count of unfinished requests, lowered when this one finishes (the
  /// connection finishes its requests itself, so the count outlives every finish()).
  std::atomic<std::uint32_t>* outstanding = nullptr;

  result first;
  std::exception_ptr failure;

  bool abandoned() const noexcept { return op && op->done(); }

  /// Accumulates one result: the first error wins, otherwise the first data result is kept.
  void add(result_ptr res);

  void note_failure(std::exception_ptr e) {
    if (!failure) failure = std::move(e);
  }

  /// Delivers the outcome (once).
  void finish() {
    if (auto counter = std::exchange(outstanding, nullptr)) counter->fetch_sub(1);
    const bool ok = !failure;
    if (auto hook = std::exchange(on_finish, nullptr)) hook(failure, abandoned());
    if (op) op->complete(failure, ok ? std::move(first) : result{});
  }

  void fail(std::exception_ptr e) {
    failure = std::move(e);
    finish();
  }

  /// Sent with the Parse of its prepared statement in front (one more result to skip).
  void sent_with_parse() noexcept { preparing_ = true; }
  /// Whether the session's prepared statement for `sql` is unusable after this answer: its
  /// Parse failed, or the server no longer knows it.
  bool spoiled_statement() const noexcept { return prepared && (preparing_ || statement_missing_); }

 private:
  bool have_first_ = false;
  bool preparing_ = false;
  bool statement_missing_ = false;
};

using request_ptr = std::unique_ptr<request>;

}  // namespace pgqueue::pg::detail

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/pg/detail/impl/request.ipp"
#endif
