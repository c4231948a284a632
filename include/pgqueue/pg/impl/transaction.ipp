// Out-of-line definitions of pgqueue/pg/transaction.hpp: included at its end (header-only), or
// compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/pg/transaction.hpp"

namespace pgqueue::pg {

PGQUEUE_DECL transaction& transaction::operator=(transaction&& o) noexcept {
  if (this != &o) {
    abandon();
    conn_ = std::move(o.conn_);
    active_ = std::exchange(o.active_, false);
    cancelled_ = std::exchange(o.cancelled_, false);
    on_end_ = std::move(o.on_end_);
  }
  return *this;
}

PGQUEUE_DECL asio::awaitable<transaction> transaction::begin(const pool& p,
                                                             transaction_options options) {
  detail::check_between(errc::invalid_argument, "transaction_options::max_attempts",
                        options.max_attempts, 1, 100);
  transaction t;
  // A session that dropped while idle in the pool fails its BEGIN with connection_lost before
  // the drop is noticed; nothing ran, so BEGIN goes once more (on a new session, or the same
  // one reconnected).
  for (int attempt = 1;; ++attempt) {
    t.conn_ = co_await p.acquire();
    try {
      co_await t.conn_->query(begin_sql(options));
      break;
    } catch (const error& e) {
      if (e.code() != errc::connection_lost || attempt == 2) throw;
    }
    t.conn_.release();
  }
  t.active_ = true;
  co_return t;
}

PGQUEUE_DECL asio::awaitable<void> transaction::commit() {
  check_active();
  active_ = false;
  bool committed = false;
  std::exception_ptr failure;
  if (!conn_->is_open()) {
    end(false);
    throw error(errc::connection_lost,
                "the session was lost before COMMIT: the transaction was rolled back");
  }
  if (cancelled_) {
    end(false);  // the pool rolls the session back
    server_diagnostics d;
    d.severity = "ERROR";
    d.sqlstate = "25P02";
    d.message =
        "a statement of the transaction was cancelled and may have run: rolled back instead";
    throw error(std::move(d));
  }
  try {
    auto r = co_await conn_->query_prepared("COMMIT", {}, cancel_until_sent);
    committed = r.command_tag() == "COMMIT";
    if (!committed) {
      server_diagnostics d;
      d.severity = "ERROR";
      d.sqlstate = "25P02";
      d.message = "the transaction was rolled back at COMMIT: an earlier statement failed";
      failure = std::make_exception_ptr(error(std::move(d)));
    }
  } catch (const error& e) {
    if (e.code() == errc::connection_lost || e.code() == errc::statement_timeout) {
      failure = std::make_exception_ptr(
          error(errc::commit_unknown, std::string("COMMIT's outcome is unknown: ") + e.what()));
    } else {
      failure = std::current_exception();
    }
  }
  end(committed);
  if (failure) std::rethrow_exception(failure);
}

PGQUEUE_DECL asio::awaitable<void> transaction::rollback() {
  check_active();
  active_ = false;
  try {
    co_await conn_->query("ROLLBACK");
  } catch (const error&) {
    // Dropped or refused: the server ends the transaction with the session.
    conn_->close();
  }
  end(false);
}

PGQUEUE_DECL std::string transaction::begin_sql(const transaction_options& o) {
  std::string sql = "BEGIN ISOLATION LEVEL ";
  switch (o.level) {
    case isolation::read_committed:
      sql += "READ COMMITTED";
      break;
    case isolation::repeatable_read:
      sql += "REPEATABLE READ";
      break;
    case isolation::serializable:
      sql += "SERIALIZABLE";
      break;
  }
  if (o.read_only) sql += " READ ONLY";
  return sql;
}

PGQUEUE_DECL asio::awaitable<result> transaction::cancel_fails_transaction(
    asio::awaitable<result> op) const {
  try {
    co_return co_await std::move(op);
  } catch (const error& e) {
    if (e.code() == asio::error::operation_aborted) cancelled_ = true;
    throw;
  }
}

}  // namespace pgqueue::pg
