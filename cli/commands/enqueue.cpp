// pgqueue enqueue QUEUE [JSON]: one job, or one per line of stdin, sent in batches.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../commands.hpp"
#include "../output.hpp"

namespace pgqueue_cli {

namespace {

using clock_type = std::chrono::steady_clock;

// --run-after / --delay as the server reads them (any timestamptz or interval PostgreSQL
// accepts), so the time is the server's, and a bad value is its clear error. One round trip.
asio::awaitable<std::optional<std::chrono::system_clock::time_point>> resolve_run_after(
    pgqueue::database& db, const enqueue_args& args) {
  if (!args.run_after && !args.delay) co_return std::nullopt;
  pgqueue::pg::params when{args.run_after ? *args.run_after : *args.delay};
  auto r = co_await db.query(
      args.run_after ? "SELECT (extract(epoch FROM $1::timestamptz) * 1000000)::bigint"
                     : "SELECT (extract(epoch FROM now() + $1::interval) * 1000000)::bigint",
      std::move(when));
  co_return std::chrono::system_clock::time_point(
      std::chrono::microseconds(r.get<std::int64_t>(0, 0)));
}

// Progress on a terminal: one line, redrawn at most 10 times a second.
struct progress {
  bool shown = isatty(STDERR_FILENO) != 0;
  clock_type::time_point start = clock_type::now(), last{};

  void update(long done, bool final = false) {
    if (!shown) return;
    const auto now = clock_type::now();
    if (!final && now - last < std::chrono::milliseconds(100)) return;
    last = now;
    const double seconds = std::chrono::duration<double>(now - start).count();
    std::fprintf(stderr, "\r\033[Kenqueued %ld jobs (%.0f/s)%s", done,
                 seconds > 0 ? static_cast<double>(done) / seconds : 0.0, final ? "\n" : "");
  }
};

// Set by SIGINT/SIGTERM while stdin is read: reading stops (the signal interrupts the blocked
// read), what was read is sent, and the tool says how far it got.
volatile std::sig_atomic_t interrupted = 0;

extern "C" void note_signal(int) {
  interrupted = 1;
}

// Installs note_signal for SIGINT and SIGTERM without SA_RESTART, for its lifetime.
struct signal_guard {
  struct sigaction old_int {
  }, old_term{};
  signal_guard() {
    struct sigaction sa {};
    sa.sa_handler = note_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~signal_guard() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  }
};

// Lines of stdin, read in large blocks with read(2): std::getline on std::cin (synchronised
// with stdio) cost more than the server's work per job (benchmarks/README.md, "cli"). A signal
// interrupts a blocked read or poll (note_signal is installed without SA_RESTART): next() then
// returns `end` with `interrupted` set.
class line_reader {
 public:
  enum class status { line, idle, end };

  /// The next line without its newline (a last line without one too): `line`. `end` at the
  /// end of stdin, on an error, or once a signal came. With `wait`, gives up once that long
  /// passed without a whole line to return: `idle` (a partial line is kept for the next call).
  status next(std::string& line, std::optional<std::chrono::milliseconds> wait) {
    for (;;) {
      const auto* start = buffer_.data() + at_;
      const auto* nl = static_cast<const char*>(std::memchr(start, '\n', end_ - at_));
      if (nl) {
        partial_.append(start, nl);
        at_ = static_cast<std::size_t>(nl - buffer_.data()) + 1;
        return take(line);
      }
      partial_.append(start, end_ - at_);
      at_ = end_ = 0;
      if (eof_ || interrupted) {
        return partial_.empty() || interrupted ? status::end : take(line);
      }
      if (wait && !readable_within(*wait)) return status::idle;
      if (interrupted) continue;  // it cut the poll short
      const auto n = ::read(STDIN_FILENO, buffer_.data(), buffer_.size());
      if (n > 0) {
        end_ = static_cast<std::size_t>(n);
      } else if (n == 0 || errno != EINTR) {
        eof_ = true;
      }
    }
  }

 private:
  status take(std::string& line) {
    line.swap(partial_);
    partial_.clear();
    return status::line;
  }

  // Whether stdin has input (or its end, or an error) within `wait`. A regular file always has.
  static bool readable_within(std::chrono::milliseconds wait) {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(wait.count())) != 0;  // an error: read() reports it
  }

  std::vector<char> buffer_ = std::vector<char>(1 << 16);
  std::size_t at_ = 0, end_ = 0;
  std::string partial_;  // the line being read, up to the end of the buffer
  bool eof_ = false;
};

struct stdin_enqueue {
  stdin_enqueue(const context& c, pgqueue::queue& queue, const pgqueue::enqueue_options& o)
      : ctx(c), q(queue), opts(o) {}

  const context& ctx;
  pgqueue::queue& q;
  const pgqueue::enqueue_options& opts;
  progress bar{};
  long enqueued = 0, last_line = 0;  // jobs in, and the last line they reach
  std::int64_t first_id = 0, last_id = 0;
  std::vector<std::pair<long, std::string>> batch;  // (line number, payload)
  long bad_line = 0;                                // the line the server refused
  long not_json_line = 0;                           // the first line that is not JSON
  std::string bad_reason;

  void took(const std::vector<std::int64_t>& ids, long through_line) {
    if (ids.empty()) return;
    if (first_id == 0) first_id = ids.front();
    last_id = ids.back();
    enqueued += static_cast<long>(ids.size());
    last_line = through_line;
    bar.update(enqueued);
  }

  // Sends the batch. When the server refuses it for its input, finds the first line that is
  // not JSON (checked here only then: a check of every line cost as much as the server's work),
  // sends the lines before it and stops there (not_json_line); when every line is JSON, sends
  // them one at a time up to the one the server refuses, so that everything before it is in and
  // the message can name it (bad_line). Other failures propagate.
  asio::awaitable<void> send() {
    if (batch.empty()) co_return;
    std::vector<std::pair<long, std::string>> lines;
    lines.swap(batch);
    std::vector<std::string> payloads;
    payloads.reserve(lines.size());
    for (const auto& l : lines) payloads.push_back(l.second);
    bool refused = false;
    try {
      auto ids = co_await q.enqueue_batch(std::move(payloads), opts);
      took(ids, lines.back().first);
    } catch (const pgqueue::error& e) {
      if (!refused_input(e)) throw;
      refused = true;
    }
    if (!refused) co_return;
    const auto not_json = std::find_if(lines.begin(), lines.end(), [](const auto& l) {
      return !nlohmann::json::accept(l.second);
    });
    if (not_json != lines.end()) {
      not_json_line = not_json->first;
      lines.erase(not_json, lines.end());
      batch.swap(lines);
      co_await send();  // the lines before it (this finds what else the server refuses)
      co_return;
    }
    for (const auto& [line_no, payload] : lines) {
      std::optional<std::int64_t> id;
      try {
        id = co_await q.enqueue(payload, opts);
      } catch (const pgqueue::error& e) {
        if (!refused_input(e)) throw;
        bad_line = line_no;
        bad_reason = e.what();
        if (!e.sqlstate().empty()) bad_reason += " (SQLSTATE " + e.sqlstate() + ")";
      }
      if (!id) co_return;
      took({*id}, line_no);
    }
  }

  std::string how_far() const {
    if (enqueued == 0) return "nothing was enqueued";
    return "lines 1-" + std::to_string(last_line) + " were enqueued (" + std::to_string(enqueued) +
           (enqueued == 1 ? " job" : " jobs") + ", ids " + std::to_string(first_id) + "-" +
           std::to_string(last_id) + ")";
  }

  // The outcome: a line of text on stderr (or a JSON object on stdout) and the exit code.
  int report(int code, const std::string& problem) {
    bar.update(enqueued, true);
    if (ctx.json) {
      nlohmann::json out{{"enqueued", enqueued}};
      if (enqueued > 0) {
        out["first_id"] = first_id;
        out["last_id"] = last_id;
        out["through_line"] = last_line;
      }
      if (!problem.empty()) out["error"] = problem;
      std::cout << out.dump() << "\n";
    } else if (problem.empty()) {
      std::cout << (enqueued > 0 ? "enqueued " + std::to_string(enqueued) +
                                       (enqueued == 1 ? " job" : " jobs") + ", ids " +
                                       std::to_string(first_id) + "-" + std::to_string(last_id)
                                 : std::string("enqueued 0 jobs (stdin had no lines)"))
                << "\n";
    }
    if (!problem.empty()) std::cerr << "pgqueue enqueue: " << printable(problem) << "\n";
    return code;
  }

  // Sends a batch once it is full, or `flush_after` after its first line came (so that a slow
  // producer's lines do not wait for the batch to fill; 0: whenever stdin has nothing more
  // ready), and the rest at the end of stdin.
  asio::awaitable<int> run(int batch_size, std::chrono::milliseconds flush_after) {
    signal_guard guard;
    line_reader in;
    std::string line;
    long line_no = 0;
    clock_type::time_point due{};  // when the batch goes, full or not
    while (!bad_line && !not_json_line) {
      std::optional<std::chrono::milliseconds> wait;
      if (!batch.empty()) {
        wait = std::max(std::chrono::milliseconds(0),
                        std::chrono::ceil<std::chrono::milliseconds>(due - clock_type::now()));
      }
      const auto got = in.next(line, wait);
      if (got == line_reader::status::end) break;
      if (got == line_reader::status::idle) {
        co_await send();
        continue;
      }
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      if (batch.empty()) due = clock_type::now() + flush_after;
      batch.emplace_back(line_no, std::move(line));
      if (static_cast<int>(batch.size()) >= batch_size ||
          (flush_after.count() > 0 && clock_type::now() >= due)) {
        co_await send();
      }
    }
    if (!bad_line && !not_json_line) co_await send();
    if (bad_line) {
      co_return report(exit_code::usage, "line " + std::to_string(bad_line) +
                                             " was refused: " + bad_reason +
                                             "; stopped there: " + how_far() + ", nothing after");
    }
    if (not_json_line) {
      co_return report(exit_code::usage, "line " + std::to_string(not_json_line) +
                                             " is not JSON; stopped there: " + how_far() +
                                             ", nothing after");
    }
    if (interrupted) {
      co_return report(exit_code::interrupted, "interrupted by a signal: " + how_far() +
                                                   "; the rest of stdin was not read");
    }
    co_return report(exit_code::ok, "");
  }
};

}  // namespace

int enqueue(const context& ctx, const enqueue_args& args) {
  if (!args.payload && args.key) {
    throw usage_error("--key applies to one job: give the payload as an argument");
  }
  if (args.run_after && args.delay) throw usage_error("give --run-after or --delay, not both");
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    pgqueue::queue q{db, args.queue};
    pgqueue::enqueue_options opts;
    opts.priority = args.priority;
    opts.max_attempts = args.max_attempts;
    opts.run_after = co_await resolve_run_after(db, args);
    opts.depends_on = args.after;  // `args` outlives the enqueues
    if (!args.payload) {
      stdin_enqueue reader(ctx, q, opts);
      co_return co_await reader.run(args.batch_size,
                                    std::chrono::milliseconds(args.flush_after_ms));
    }
    if (args.key) opts.idempotency_key = *args.key;
    const auto id = co_await q.enqueue(*args.payload, opts);
    if (ctx.json) {
      std::cout << nlohmann::json{{"id", id}}.dump() << "\n";
    } else {
      std::cout << id << "\n";
    }
    co_return exit_code::ok;
  });
}

}  // namespace pgqueue_cli
