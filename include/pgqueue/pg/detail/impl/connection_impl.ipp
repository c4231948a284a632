// Out-of-line definitions of pgqueue/pg/detail/connection_impl.hpp: included at its end
// (header-only), or compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/pg/detail/connection_impl.hpp"

namespace pgqueue::pg::detail {

PGQUEUE_DECL void connection_impl::start_connect(
    std::string conninfo, operation_ptr<std::shared_ptr<connection_impl>> op) {
  close_at_context_shutdown();
  scrubber_ = secret_scrubber(conninfo);
  conninfo_ = conninfo;  // kept for reconnecting
  auto c = std::make_shared<connector>(
      strand_, std::move(conninfo), options_.connect_timeout, scrubber_,
      [self = shared_from_this(), op](std::exception_ptr e, conn_ptr conn) {
        if (op->done()) return;  // cancelled; `conn` is closed on scope exit
        if (e) return op->complete(std::move(e));
        if (auto failure = self->adopt(std::move(conn))) return op->complete(failure);
        op->complete(nullptr, make_handle(self));
      });
  op->on_cancel([weak = std::weak_ptr<connector>(c)] {
    if (auto p = weak.lock()) p->cancel();
  });
  c->start();
}

PGQUEUE_DECL void connection_impl::submit(request_ptr r) {
  if (!r->outstanding) {
    outstanding_.fetch_add(1);
    r->outstanding = &outstanding_;
  }
  switch (state_) {
    case state::open:
      requests_.push(std::move(r));
      if (!pumping_) pump(!reading_);
      return;
    case state::reconnecting:
      if (options_.reconnect_wait.count() <= 0) return r->fail(waiting_error());
      r->deadline = std::chrono::steady_clock::now() + options_.reconnect_wait;
      requests_.push(std::move(r));
      arm_wait_timer();
      return;
    default:
      return r->fail(closed_error());
  }
}

PGQUEUE_DECL void connection_impl::listen(std::shared_ptr<subscription_state> sub,
                                          operation_ptr<result> op) {
  if (state_ == state::closed) return op->complete(closed_error());
  const std::string& channel = sub->channel();
  channels_.begin_listen(channel);
  auto r = make_statement("LISTEN " + quote_identifier(channel), std::move(op));
  r->on_finish = [this, sub](const std::exception_ptr& failure, bool abandoned) {
    if (channels_.end_listen(sub->channel(), !failure && !abandoned ? sub : nullptr)) {
      unlisten(sub->channel());
    }
  };
  submit(std::move(r));
}

PGQUEUE_DECL request_ptr connection_impl::make_statement(std::string sql, operation_ptr<result> op,
                                                         params args) {
  auto r = std::make_unique<request>();
  r->sql = std::move(sql);
  r->args = std::move(args);
  r->op = std::move(op);
  return r;
}

PGQUEUE_DECL std::exception_ptr connection_impl::adopt(conn_ptr conn) {
  last_fatal_.clear();
  conn_ = std::move(conn);
  PQsetNoticeReceiver(conn_.get(), &connection_impl::on_notice, this);
  if (PQsetnonblocking(conn_.get(), 1) != 0 || PQenterPipelineMode(conn_.get()) != 1) {
    auto e = make_error(errc::protocol_error, "cannot enter pipeline mode: " + libpq_message());
    conn_.reset();
    return e;
  }
  try {
    socket_.assign(PQsocket(conn_.get()));
  } catch (const std::system_error& ex) {
    conn_.reset();
    return make_error(errc::connect_failed, std::string("cannot watch socket: ") + ex.what());
  }
  pid_ = PQbackendPID(conn_.get());
  statements_.clear();  // prepared statements belong to the session
  state_ = state::open;
  open_ = true;
  in_transaction_ = false;
  // Requests that waited for this session stop counting down, and go after its set-up.
  ++wait_gen_;
  wait_armed_ = false;
  wait_timer_.cancel();
  std::deque<request_ptr> setup;
  // What the library's statements rely on, whatever the server, database, role, conninfo or
  // PGOPTIONS set. READ COMMITTED: in REPEATABLE READ concurrent claims failed with 40001, pause
  // refused, and no claim floor was made (pg::transaction still begins with its own level).
  // array_nulls: a NULL in the arrays it sends (enqueue_batch's keys) is NULL, not the text
  // "NULL" (with it off, a batch's keyless jobs were folded into one). extra_float_digits: the
  // epochs it reads come back exact (at -15, a claim's due_at was in 2033). UTF-8, its strings'
  // encoding (with PGCLIENTENCODING=LATIN1 a payload's "é" was stored as "Ã©"), except in a
  // SQL_ASCII database: its bytes are unchecked, and converting them refused a payload that is
  // not UTF-8, and with it every claim of its queue.
  std::string settings =
      "SELECT set_config('default_transaction_isolation', 'read committed', false), "
      "set_config('array_nulls', 'on', false), set_config('extra_float_digits', '1', false)";
  const char* server_encoding = PQparameterStatus(conn_.get(), "server_encoding");
  const char* client_encoding = PQparameterStatus(conn_.get(), "client_encoding");
  if (!(server_encoding && std::string_view(server_encoding) == "SQL_ASCII") &&
      !(client_encoding && std::string_view(client_encoding) == "UTF8")) {
    settings += ", set_config('client_encoding', 'UTF8', false)";
  }
  setup.push_back(make_statement(std::move(settings), nullptr));
  if (options_.statement_timeout.count() > 0) {
    params ms{std::to_string(options_.statement_timeout.count())};
    setup.push_back(make_statement("SELECT set_config('statement_timeout', $1, false)", nullptr,
                                   std::move(ms)));
  }
  for (const auto& channel : channels_.channels()) setup.push_back(relisten(channel));
  requests_.new_session(std::move(setup));
  pump();
  return nullptr;
}

PGQUEUE_DECL void connection_impl::close_at_context_shutdown() {
  auto& ctx = asio::query(strand_.get_inner_executor(), asio::execution::context);
  shutdown_registry_ = asio::use_service<context_shutdown>(ctx).shared_registry();
  context_shutdown::add(*shutdown_registry_, this, [weak = weak_from_this()] {
    if (auto self = weak.lock()) {
      self->lose(errc::closed, "the connection's execution context was shut down");
    }
  });
}

PGQUEUE_DECL request_ptr connection_impl::relisten(const std::string& channel) {
  auto r = make_statement("LISTEN " + quote_identifier(channel), nullptr);
  r->on_finish = [this, channel](const std::exception_ptr& failure, bool) {
    if (!failure) {
      channels_.resynced(channel);
    } else if (state_ == state::open) {
      channels_.fail_channel(channel, failure);  // the server refused; a drop is retried
    }
  };
  return r;
}

PGQUEUE_DECL void connection_impl::on_notice(void* arg, const PGresult* res) {
  const char* sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
  if (sev && (std::string_view(sev) == "FATAL" || std::string_view(sev) == "PANIC")) {
    static_cast<connection_impl*>(arg)->last_fatal_ =
        trim_trailing_newlines(std::string(sev) + ":  " + field(res, PG_DIAG_MESSAGE_PRIMARY));
  }
}

PGQUEUE_DECL void connection_impl::pump(bool check_input, bool readable) {
  pumping_ = true;
  bool progress = true;
  while (progress && state_ == state::open) {
    progress = false;
    arm_waits();
    const short ev = readable && !want_write_     ? POLLIN
                     : check_input || want_write_ ? socket_.ready_now(want_write_)
                                                  : 0;
    check_input = true;
    readable = false;
    if (ev & (POLLIN | POLLERR | POLLHUP)) {
      if (PQconsumeInput(conn_.get()) != 1) {
        lose_connection();
        break;
      }
      progress = true;
    }
    if (want_write_ && (ev & (POLLOUT | POLLIN | POLLERR | POLLHUP))) {
      if (!flush()) break;
      if (ev & POLLOUT) progress = true;
    }
    if (!read_results()) break;
    drain_notifications();
    if (send_queued() && want_write_) progress = true;
    if (state_ == state::open && PQstatus(conn_.get()) == CONNECTION_BAD) lose_connection();
  }
  pumping_ = false;
  arm_watchdog();
}

PGQUEUE_DECL void connection_impl::arm_waits() {
  using wait = asio::posix::descriptor_base;
  if (!reading_) {
    reading_ = true;
    socket_.async_wait(wait::wait_read, [self = shared_from_this()](std::error_code ec) {
      self->reading_ = false;
      self->pump(true, !ec);
    });
  }
  if (want_write_ && !writing_) {
    writing_ = true;
    socket_.async_wait(wait::wait_write, [self = shared_from_this()](std::error_code) {
      self->writing_ = false;
      self->pump();
    });
  }
}

PGQUEUE_DECL bool connection_impl::flush() {
  const int r = PQflush(conn_.get());
  if (r < 0) {
    lose_connection();
    return false;
  }
  want_write_ = r == 1;
  return true;
}

PGQUEUE_DECL bool connection_impl::send_queued() {
  bool sent = false;
  while (state_ == state::open) {
    request* r = requests_.next_to_send(script_running_);
    if (!r) break;
    if (r->type == request::kind::script) {
      if (!start_script(*r)) return true;
    } else if (!send_statement(*r)) {
      return true;
    }
    if (requests_.idle()) progress_at_ = clock::now();  // the server starts on it now
    requests_.sent();
    sent = true;
  }
  if (sent && state_ == state::open) flush();
  return sent;
}

PGQUEUE_DECL bool connection_impl::send_statement(request& r) {
  const auto values = r.args.pointers();
  const int n = static_cast<int>(values.size());
  bool sent = false;
  if (r.prepared) {
    // The first use in this session sends the Parse in front of the execution, in the same
    // pipeline sync: no extra round trip. Later requests may use the name at once, as the
    // server handles the pipeline in order.
    auto [it, fresh] = statements_.try_emplace(r.sql, "");
    if (fresh) {
      it->second = "pgqueue_" + std::to_string(++statement_count_);
      if (PQsendPrepare(conn_.get(), it->second.c_str(), r.sql.c_str(), n, nullptr) != 1) {
        statements_.erase(it);
        refuse_front("cannot send statement: ");
        return false;
      }
      r.sent_with_parse();
    }
    r.statement = it->second;
    sent = PQsendQueryPrepared(conn_.get(), it->second.c_str(), n, values.data(), nullptr, nullptr,
                               0) == 1;
  } else {
    sent = PQsendQueryParams(conn_.get(), r.sql.c_str(), n, nullptr, values.data(), nullptr,
                             nullptr, 0) == 1;
  }
  if (!sent || PQpipelineSync(conn_.get()) != 1) {
    refuse_front("cannot send statement: ");
    return false;
  }
  return true;
}

PGQUEUE_DECL bool connection_impl::start_script(const request& r) {
  if (PQexitPipelineMode(conn_.get()) != 1) {
    refuse_front("cannot leave pipeline mode for a script: ");
    return false;
  }
  if (PQsendQuery(conn_.get(), r.sql.c_str()) != 1) {
    refuse_front("cannot send script: ");
    return false;
  }
  script_running_ = true;
  return true;
}

PGQUEUE_DECL bool connection_impl::end_script() {
  script_running_ = false;
  note_transaction_status();
  requests_.answered()->finish();
  if (state_ != state::open) return false;
  if (PQenterPipelineMode(conn_.get()) != 1) {
    if (PQstatus(conn_.get()) == CONNECTION_BAD) {
      lose_connection();
    } else {
      discard_session(nullptr, "cannot re-enter pipeline mode after a script: " + libpq_message());
    }
    return false;
  }
  return true;
}

PGQUEUE_DECL bool connection_impl::read_results() {
  int nulls = 0;
  while (state_ == state::open && !requests_.idle()) {
    if (PQisBusy(conn_.get())) break;
    result_ptr res(PQgetResult(conn_.get()));
    if (!res) {
      if (script_running_) {
        if (PQstatus(conn_.get()) == CONNECTION_BAD) break;
        if (!end_script()) return false;
        continue;
      }
      // One NULL separates a statement's results from its Sync; more means "nothing yet".
      if (++nulls > 1) break;
      continue;
    }
    nulls = 0;
    progress_at_ = clock::now();
    switch (PQresultStatus(res.get())) {
      case PGRES_PIPELINE_SYNC: {
        note_transaction_status();
        auto done = requests_.answered();
        // Prepared again on next use; requests already sent with the name fail (26000).
        if (done->spoiled_statement()) {
          auto it = statements_.find(done->sql);
          if (it != statements_.end() && it->second == done->statement) statements_.erase(it);
        }
        done->finish();
        break;
      }
      case PGRES_COPY_IN:
      case PGRES_COPY_OUT:
      case PGRES_COPY_BOTH:
        // The session now waits for COPY data this layer never sends or reads.
        discard_session(requests_.answered(), "COPY is not supported on a pgqueue::pg connection");
        return false;
      default:
        requests_.answering()->add(std::move(res));
    }
  }
  return state_ == state::open;
}

PGQUEUE_DECL void connection_impl::drain_notifications() {
  while (state_ == state::open) {
    notify_ptr n(PQnotifies(conn_.get()));
    if (!n) break;
    channels_.dispatch(notification{n->relname, n->extra ? n->extra : "", n->be_pid});
  }
}

PGQUEUE_DECL void connection_impl::lose_connection() {
  std::string msg = "connection to server lost: " + libpq_message();
  if (!last_fatal_.empty() && msg.find(last_fatal_) == std::string::npos) {
    msg += "\n" + last_fatal_;
  }
  lose(errc::connection_lost, std::move(msg));
}

PGQUEUE_DECL void connection_impl::note_transaction_status() {
  switch (PQtransactionStatus(conn_.get())) {
    case PQTRANS_IDLE:
      in_transaction_ = false;
      break;
    case PQTRANS_INTRANS:
    case PQTRANS_INERROR:
      in_transaction_ = true;
      break;
    default:
      break;  // busy with later requests: keep what the last idle moment said
  }
}

PGQUEUE_DECL void connection_impl::lose(errc code, std::string message) {
  if (state_ == state::closed) return;
  const auto loss = decide_loss(code, options_.reconnect, state_ == state::open, in_transaction_);
  const bool retry = loss.reconnect;
  message += loss.note;
  auto failure = make_error(code, scrubber_.scrub(std::move(message)));
  socket_.release();
  script_running_ = false;
  want_write_ = false;
  pid_ = 0;
  if (retry) {
    state_ = state::reconnecting;
    lost_error_ = failure;
  } else {
    state_ = state::closed;
    open_ = false;
    closed_error_ = failure;
    retry_timer_.cancel();
    wait_timer_.cancel();
    watchdog_.cancel();
    if (auto c = std::exchange(connector_, nullptr)) c->cancel();
  }
  // Unsent requests wait for the new session, or fail when there will be none.
  requests_.drop(failure,
                 retry ? std::optional(clock::now() + options_.reconnect_wait) : std::nullopt,
                 closed_error_);
  conn_.reset();
  if (!retry) {
    channels_.fail_all(closed_error_);
    return;
  }
  if (options_.reconnect_wait.count() <= 0) expire_waiting();
  arm_wait_timer();
  schedule_reconnect();
}

PGQUEUE_DECL void connection_impl::attempt_reconnect() {
  if (state_ != state::reconnecting) return;
  ++attempts_;
  auto c =
      std::make_shared<connector>(strand_, conninfo_, options_.connect_timeout, scrubber_,
                                  [self = shared_from_this()](std::exception_ptr e, conn_ptr conn) {
                                    self->connector_.reset();
                                    if (self->state_ != state::reconnecting)
                                      return;  // closed meanwhile
                                    if (!e) e = self->adopt(std::move(conn));
                                    if (e) {
                                      self->last_attempt_error_ = e;
                                      return self->schedule_reconnect();
                                    }
                                    ++self->reconnects_;
                                    self->backoff_.reset();
                                  });
  connector_ = c;
  c->start();  // may finish (and drop connector_) before it returns
}

PGQUEUE_DECL std::exception_ptr connection_impl::waiting_error() const {
  std::string why = "connection to server lost and not re-established within " +
                    std::to_string(options_.reconnect_wait.count()) + " ms";
  try {
    if (last_attempt_error_) std::rethrow_exception(last_attempt_error_);
    if (lost_error_) std::rethrow_exception(lost_error_);
  } catch (const std::exception& e) {
    why += std::string(": ") + e.what();
  }
  return make_error(errc::connection_lost, std::move(why));
}

PGQUEUE_DECL void connection_impl::arm_wait_timer() {
  const auto next = requests_.earliest_deadline();
  if (state_ != state::reconnecting || !next) return;
  const auto earliest = *next;
  if (wait_armed_ && wait_at_ <= earliest) return;
  wait_armed_ = true;
  wait_at_ = earliest;
  wait_timer_.expires_at(earliest);
  wait_timer_.async_wait([self = shared_from_this(), gen = ++wait_gen_](std::error_code) {
    if (gen != self->wait_gen_) return;  // re-armed or reconnected since
    self->wait_armed_ = false;
    self->expire_waiting();
    self->arm_wait_timer();
  });
}

PGQUEUE_DECL void connection_impl::arm_watchdog() {
  if (watchdog_armed_) return;
  const auto check = watchdog_now();
  if (check.what == watchdog_check::verdict::off) return;
  watchdog_armed_ = true;
  watchdog_.expires_at(check.at);  // when expired already, the handler below runs at once
  watchdog_.async_wait([self = shared_from_this()](std::error_code ec) {
    self->watchdog_armed_ = false;
    if (ec) return;
    switch (self->watchdog_now().what) {
      case watchdog_check::verdict::off:
        return;
      case watchdog_check::verdict::wait:  // answers came meanwhile
        return self->arm_watchdog();
      case watchdog_check::verdict::expired:
        self->lose(errc::statement_timeout,
                   "no answer from the server within " +
                       std::to_string(watchdog_limit(self->options_.statement_timeout).count()) +
                       " ms (statement_timeout + 1 s); the connection was dropped (the server "
                       "may still run the statement)");
    }
  });
}

}  // namespace pgqueue::pg::detail
