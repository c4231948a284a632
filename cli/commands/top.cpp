// pgqueue top: the queues live, refreshed every --interval, like top(1). One reading of
// pgqueue.queue_summary() per frame (read_queue_status); rates are the growth of its totals
// between two readings divided by the time between them. Full-screen on a terminal; plain
// frames (or NDJSON with --json) otherwise, or with --once / --iterations, for scripts.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include "../commands.hpp"
#include "../top/frame.hpp"
#include "../top/render.hpp"
#include "../top/terminal.hpp"

namespace pgqueue_cli {

namespace {

using clock_type = std::chrono::steady_clock;

// A queue name longer than this is cut on a terminal (the counts matter more).
constexpr std::size_t name_cap = 32;

// How the frames are shown, decided once from the options and what stdin and stdout are.
struct display {
  int frames = 0;     // 0: until 'q' or a signal
  bool full = false;  // full-screen (stdout a terminal, no --json, no frame count)
  bool keys = false;  // 'q' quits, space or Enter reads again at once (stdin a terminal)
};

// What the loop and the events that end or hurry it (signals, keys, resizes) share. Handlers
// hold it by shared_ptr: one may still be queued, cancelled, after the loop has returned.
struct loop_state {
  explicit loop_state(const asio::any_io_executor& ex)
      : timer(ex), signals(ex, SIGINT, SIGTERM), resized(ex, SIGWINCH), keys(ex) {}

  asio::steady_timer timer;  // until the next reading
  asio::signal_set signals;
  asio::signal_set resized;
  asio::posix::stream_descriptor keys;
  asio::cancellation_signal cancel_reading;
  bool reading = false;   // a reading is in flight: stopping cancels it
  bool read_now = false;  // a key or a resize asked for the next reading now
  bool stopping = false;
  int code = exit_code::ok;
  char key = 0;

  void stop(int exit_code) {
    if (stopping) return;
    stopping = true;
    code = exit_code;
    timer.cancel();
    if (reading) cancel_reading.emit(asio::cancellation_type::terminal);
  }

  void hurry() {
    read_now = true;
    timer.cancel();
  }

  void close() {
    std::error_code ignored;
    signals.cancel(ignored);
    resized.cancel(ignored);
    keys.close(ignored);
    timer.cancel();
  }
};

void await_signal(const std::shared_ptr<loop_state>& s) {
  s->signals.async_wait([s](std::error_code ec, int) {
    if (!ec) s->stop(exit_code::interrupted);
  });
}

void await_resize(const std::shared_ptr<loop_state>& s) {
  s->resized.async_wait([s](std::error_code ec, int) {
    if (ec) return;
    s->hurry();  // the next frame at the new size
    await_resize(s);
  });
}

void await_key(const std::shared_ptr<loop_state>& s) {
  s->keys.async_read_some(asio::buffer(&s->key, 1), [s](std::error_code ec, std::size_t n) {
    if (ec || n != 1) return;  // closed, or the terminal went away: no more keys
    if (s->key == 'q' || s->key == 'Q') {
      s->stop(exit_code::ok);
      return;
    }
    if (s->key == ' ' || s->key == '\n') s->hurry();
    await_key(s);
  });
}

// One reading, cancelled when the loop stops (a signal must not wait for a slow server).
// Empty when it was cancelled.
asio::awaitable<std::optional<std::vector<pgqueue::queue_status>>> read_or_stop(
    pgqueue::database& db, const std::shared_ptr<loop_state>& s) {
  auto ex = co_await asio::this_coro::executor;
  std::optional<std::vector<pgqueue::queue_status>> out;
  std::exception_ptr failure;
  s->reading = true;
  try {
    auto reading =
        asio::co_spawn(ex, pgqueue::read_queue_status(db),
                       asio::bind_cancellation_slot(s->cancel_reading.slot(), asio::use_awaitable));
    out = co_await std::move(reading);
  } catch (...) {
    failure = std::current_exception();
  }
  s->reading = false;
  if (failure && !s->stopping) std::rethrow_exception(failure);
  co_return out;
}

void show(const top_view::frame& f, const context& ctx,
          const std::optional<top_view::full_screen>& screen, bool first) {
  if (ctx.json) {
    std::cout << top_view::json_line(f) << "\n" << std::flush;
    return;
  }
  if (screen) {
    auto lines = top_view::text_lines(f, name_cap);
    lines.insert(lines.begin() + 2, "");  // the header apart from the table, as top(1) has it
    screen->draw(lines);
    return;
  }
  std::ostringstream out;
  if (!first) out << "\n";  // frames apart by a blank line
  for (const auto& line : top_view::text_lines(f)) out << line << "\n";
  std::cout << out.str() << std::flush;
}

asio::awaitable<int> run_top(pgqueue::database& db, const context& ctx, const top_args& args,
                             const display& d) {
  auto ex = co_await asio::this_coro::executor;
  auto name = co_await db.query("SELECT current_database()");
  const std::string database = name.get<std::string>(0, 0);
  auto s = std::make_shared<loop_state>(ex);
  await_signal(s);
  // Restored in reverse order whichever way this returns (destructors).
  std::optional<top_view::raw_keys> key_mode;
  if (d.keys) {
    key_mode.emplace(STDIN_FILENO);
    s->keys.assign(::dup(STDIN_FILENO));
    await_key(s);
  }
  std::optional<top_view::full_screen> screen;
  if (d.full) {
    screen.emplace();
    await_resize(s);
  }
  const auto interval = std::chrono::duration_cast<clock_type::duration>(
      std::chrono::duration<double>(args.interval));
  std::optional<std::vector<pgqueue::queue_status>> before;
  clock_type::time_point before_at{};
  try {
    for (int n = 0; !s->stopping && (d.frames == 0 || n < d.frames); ++n) {
      if (n > 0 && !s->read_now) {
        s->timer.expires_at(before_at + interval);
        std::error_code ec;
        co_await s->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      s->read_now = false;
      if (s->stopping) break;
      const auto at = clock_type::now();
      auto now = co_await read_or_stop(db, s);
      if (!now) break;
      const auto seconds = std::chrono::duration<double>(at - before_at).count();
      auto f = top_view::make_frame(*now, before ? &*before : nullptr, seconds, database);
      show(f, ctx, screen, n == 0);
      before = std::move(now);
      before_at = at;
    }
  } catch (...) {
    s->close();
    throw;
  }
  s->close();
  co_return s->code;
}

}  // namespace

int top(const context& ctx, const top_args& args) {
  if (!std::isfinite(args.interval) || args.interval < 0.1 || args.interval > 3600) {
    throw usage_error("--interval must be between 0.1 and 3600 seconds");
  }
  display d;
  d.frames = args.once ? 1 : args.iterations;
  d.full = d.frames == 0 && !ctx.json && ::isatty(STDOUT_FILENO) != 0;
  d.keys = d.frames != 1 && ::isatty(STDIN_FILENO) != 0;
  // A monitor rides out a database restart: each reading waits for the session up to an hour
  // (the last frame stays up; q and signals still end it at once).
  context live = ctx;
  live.reconnect_wait = std::chrono::hours(1);
  return live.run(
      [&](pgqueue::database& db) -> asio::awaitable<int> { return run_top(db, live, args, d); });
}

}  // namespace pgqueue_cli
