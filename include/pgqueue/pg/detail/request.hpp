// One unit of work for the connection: a pipelined statement or a simple-protocol script.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>

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
  /// Null for fire-and-forget work (UNLISTEN). A done op means the caller gave up: results
  /// are still read, to keep the pipeline in step, and then dropped.
  operation_ptr<result> op;
  /// Runs on the strand before the caller is resumed; told the failure (null on success) and
  /// whether the caller is still waiting.
  std::function<void(const std::exception_ptr& failure, bool abandoned)> on_finish;
  /// While reconnecting: when a request not yet sent gives up waiting for the new session.
  std::chrono::steady_clock::time_point deadline{};

  result first;
  std::exception_ptr failure;

  bool abandoned() const noexcept { return op && op->done(); }

  /// Accumulates one result: the first error wins, otherwise the first data result is kept.
  void add(result_ptr res) {
    switch (PQresultStatus(res.get())) {
      case PGRES_TUPLES_OK:
      case PGRES_COMMAND_OK:
      case PGRES_EMPTY_QUERY:
      case PGRES_SINGLE_TUPLE:
        if (!have_first_) {
          first = result(res.release());
          have_first_ = true;
        }
        break;
      case PGRES_PIPELINE_ABORTED:
        note_failure(make_error(errc::protocol_error, "statement skipped: pipeline aborted"));
        break;
      default:
        note_failure(std::make_exception_ptr(server_error_of(res.get())));
        break;
    }
  }

  void note_failure(std::exception_ptr e) {
    if (!failure) failure = std::move(e);
  }

  /// Delivers the outcome (once).
  void finish() {
    const bool ok = !failure;
    if (auto hook = std::exchange(on_finish, nullptr)) hook(failure, abandoned());
    if (op) op->complete(failure, ok ? std::move(first) : result{});
  }

  void fail(std::exception_ptr e) {
    failure = std::move(e);
    finish();
  }

 private:
  bool have_first_ = false;
};

using request_ptr = std::unique_ptr<request>;

}  // namespace pgqueue::pg::detail
