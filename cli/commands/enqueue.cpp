// pgqueue enqueue QUEUE [JSON]: one job, or one per line of stdin, sent in batches.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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
    std::fprintf(stderr, "\r\033[Kenqueued %ld %s (%.0f/s)%s", done, done == 1 ? "job" : "jobs",
                 seconds > 0 ? static_cast<double>(done) / seconds : 0.0, final ? "\n" : "");
  }
};

// Set by SIGINT/SIGTERM/SIGHUP while stdin is read: reading stops (the signal interrupts the
// blocked read), what was read is sent, and the tool says how far it got. A second signal while
// a batch is at the server (which may not answer) ends the tool at once, with the message
// prepared before that batch was sent.
volatile std::sig_atomic_t interrupted = 0;
volatile std::sig_atomic_t at_server = 0;  // a batch was sent and is not answered yet
char at_server_message[512];
std::size_t at_server_length = 0;
char at_server_json[512];  // with --json, the object printed on stdout then
std::size_t at_server_json_length = 0;

extern "C" void note_signal(int) {
  if (interrupted && at_server) {
    [[maybe_unused]] auto n = ::write(STDOUT_FILENO, at_server_json, at_server_json_length);
    n = ::write(STDERR_FILENO, at_server_message, at_server_length);
    ::_exit(4);  // exit_code::interrupted
  }
  interrupted = 1;
}

// Installs note_signal for SIGINT, SIGTERM and SIGHUP without SA_RESTART, for its lifetime.
struct signal_guard {
  static constexpr int signals[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old[3]{};
  signal_guard() {
    struct sigaction sa {};
    sa.sa_handler = note_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) sigaction(signals[i], &sa, &old[i]);
  }
  ~signal_guard() {
    for (int i = 0; i < 3; ++i) sigaction(signals[i], &old[i], nullptr);
  }
};

// Lines of stdin, read in large blocks with read(2): std::getline on std::cin (synchronised
// with stdio) cost more than the server's work per job (benchmarks/README.md, "cli"). A signal
// interrupts a blocked read or poll (note_signal is installed without SA_RESTART): next() then
// returns `end` with `interrupted` set.
class line_reader {
 public:
  enum class status { line, idle, end, too_long };

  /// The longest line taken: jsonb holds at most this many bytes, so a longer line cannot be a
  /// job (and an endless one, /dev/zero, would grow without limit).
  static constexpr std::size_t max_line = 0x0FFFFFFF;

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
      if (partial_.size() > max_line) return status::too_long;
      if (eof_ || interrupted) {
        return partial_.empty() || interrupted ? status::end : take(line);
      }
      if (wait && !readable_within(*wait)) return status::idle;
      if (interrupted) continue;  // it cut the poll short
      const auto n = ::read(STDIN_FILENO, buffer_.data(), buffer_.size());
      if (n > 0) {
        end_ = static_cast<std::size_t>(n);
      } else if (n == 0 || errno != EINTR) {
        if (n < 0) error_ = errno;
        eof_ = true;
      }
    }
  }

  /// The errno of a failed read (stdin is a directory, or not open for reading), else 0.
  int error() const { return error_; }
  /// Whether a line was begun and has no newline yet.
  bool partial() const { return !partial_.empty(); }

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
  int error_ = 0;
};

// Every message of the stdin mode starts so (the signal handler's too).
constexpr const char* message_prefix = "pgqueue enqueue: ";

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
  long in_flight_first = 0, in_flight_last = 0;     // the lines last sent
  long bad_line = 0;                                // the line the server refused
  long too_long_line = 0;                           // a line longer than jsonb holds
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

  // Whether a refused batch holds a line to blame: the server refused the input (class 22, an
  // unknown --after id), found it too complex (class 54: nesting too deep), or the client
  // refused a line (a NUL byte).
  static bool line_refused(const pgqueue::error& e) {
    return refused_input(e) || e.sqlstate().starts_with("54") ||
           e.code() == pgqueue::errc::invalid_argument ||
           e.code() == pgqueue::pg::errc::invalid_argument;
  }

  using lines_type = std::vector<std::pair<long, std::string>>;  // (line number, payload)

  // Sends the batch. When it is refused for a line, finds the first such line by halves, in
  // order, so that every line before it is in (about 2 log2(n) round trips, only then), and
  // names it: not_json_line when it is not JSON either, else bad_line with the server's
  // reason. Other failures propagate.
  asio::awaitable<void> send() {
    if (batch.empty()) co_return;
    lines_type lines;
    lines.swap(batch);
    co_await send_until_refused(lines, 0, lines.size());
  }

  // Sends lines [from, to) of `lines`; false once one was refused.
  asio::awaitable<bool> send_until_refused(const lines_type& lines, std::size_t from,
                                           std::size_t to) {
    std::vector<std::string> payloads;
    payloads.reserve(to - from);
    for (auto i = from; i < to; ++i) payloads.push_back(lines[i].second);
    sending(lines[from].first, lines[to - 1].first);
    try {
      auto ids = co_await q.enqueue_batch(std::move(payloads), opts);
      at_server = 0;
      took(ids, lines[to - 1].first);
      co_return true;
    } catch (const pgqueue::error& e) {
      at_server = 0;
      if (!line_refused(e)) throw;
      if (to - from == 1) {
        if (!nlohmann::json::accept(lines[from].second)) {
          not_json_line = lines[from].first;
        } else {
          bad_line = lines[from].first;
          bad_reason = e.what();
          if (!e.sqlstate().empty()) bad_reason += " (SQLSTATE " + e.sqlstate() + ")";
        }
      }
    }
    if (to - from == 1) co_return false;  // (refused: an answer returned above)
    const auto middle = from + (to - from) / 2;
    if (!co_await send_until_refused(lines, from, middle)) co_return false;
    co_return co_await send_until_refused(lines, middle, to);
  }

  // Lines `first`-`last` go to the server now: what a second signal prints if it never answers.
  void sending(long first, long last) {
    in_flight_first = first;
    in_flight_last = last;
    const auto problem = "interrupted twice while " + span_is(first, last) +
                         " at the server: " + maybe_in(first, last) + "; " + how_far() +
                         ", nothing after";
    const auto text = message_prefix + problem + "\n";
    at_server_length = std::min(text.size(), sizeof at_server_message);
    std::memcpy(at_server_message, text.data(), at_server_length);
    at_server_json_length = 0;
    if (ctx.json) {
      const auto object = outcome_json(problem) + "\n";
      at_server_json_length = std::min(object.size(), sizeof at_server_json);
      std::memcpy(at_server_json, object.data(), at_server_json_length);
    }
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the message before the flag
    at_server = 1;
  }

  static std::string span(long first, long last) {
    return first == last ? "line " + std::to_string(first)
                         : "lines " + std::to_string(first) + "-" + std::to_string(last);
  }

  // "line 3 was", "lines 3-9 were".
  static std::string span_is(long first, long last) {
    return span(first, last) + (first == last ? " was" : " were");
  }

  static std::string maybe_in(long first, long last) {
    return first == last ? "it may or may not be in" : "they may or may not be in";
  }

  std::string ids() const {
    return first_id == last_id ? "id " + std::to_string(first_id)
                               : "ids " + std::to_string(first_id) + "-" + std::to_string(last_id);
  }

  // Sends the batch; a failure that is not the input's comes back as its message (with the
  // lines that were at the server then), for the report.
  asio::awaitable<std::string> send_or_failure() {
    std::string failure;
    bool answered = false;  // the server answered the batch with an error: it was rolled back
    try {
      co_await send();
    } catch (const pgqueue::error& e) {
      failure = e.what();
      if (!e.sqlstate().empty()) failure += " (SQLSTATE " + e.sqlstate() + ")";
      // A lost connection (class 08, or no SQLSTATE) or a terminated session (57P0x) may
      // have come after the commit.
      answered = !e.sqlstate().empty() && !e.sqlstate().starts_with("08") &&
                 !e.sqlstate().starts_with("57P0");
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty()) {
      const bool one = in_flight_first == in_flight_last;
      failure += "; " + span_is(in_flight_first, in_flight_last) +
                 (answered ? (one ? " not enqueued (the server refused its batch)"
                                  : " not enqueued (the server refused their batch)")
                           : " being sent: " + maybe_in(in_flight_first, in_flight_last));
    }
    co_return failure;
  }

  std::string how_far() const {
    if (enqueued == 0) return "nothing was enqueued";
    return span_is(1, last_line) + " enqueued (" + std::to_string(enqueued) +
           (enqueued == 1 ? " job, " : " jobs, ") + ids() + ")";
  }

  // The --json object of the outcome so far, with `problem` (none: "").
  std::string outcome_json(const std::string& problem) const {
    nlohmann::json out{{"enqueued", enqueued}};
    if (enqueued > 0) {
      out["first_id"] = first_id;
      out["last_id"] = last_id;
      out["through_line"] = last_line;
    }
    if (!problem.empty()) out["error"] = problem;
    return out.dump();
  }

  // The outcome: a line of text on stderr (or a JSON object on stdout) and the exit code.
  int report(int code, const std::string& problem) {
    bar.update(enqueued, true);
    if (ctx.json) {
      std::cout << outcome_json(problem) << "\n";
    } else if (problem.empty()) {
      std::cout << (enqueued > 0 ? "enqueued " + std::to_string(enqueued) +
                                       (enqueued == 1 ? " job, " : " jobs, ") + ids()
                                 : std::string("enqueued 0 jobs (stdin had no lines)"))
                << "\n";
    }
    if (!problem.empty()) std::cerr << message_prefix << printable(problem) << "\n";
    return code;
  }

  // Sends a batch once it is full, or `flush_after` after its first line came (so that a slow
  // producer's lines do not wait for the batch to fill; 0: whenever stdin has nothing more
  // ready), and the rest at the end of stdin.
  asio::awaitable<int> run(int batch_size, std::chrono::milliseconds flush_after) {
    signal_guard guard;
    line_reader in;
    std::string line, failure;
    long line_no = 0;
    clock_type::time_point due{};  // when the batch goes, full or not
    while (!bad_line && !not_json_line && failure.empty()) {
      std::optional<std::chrono::milliseconds> wait;
      if (!batch.empty()) {
        wait = std::max(std::chrono::milliseconds(0),
                        std::chrono::ceil<std::chrono::milliseconds>(due - clock_type::now()));
      }
      const auto got = in.next(line, wait);
      if (got == line_reader::status::end) break;
      if (got == line_reader::status::too_long) {
        too_long_line = line_no + 1;
        break;
      }
      if (got == line_reader::status::idle) {
        failure = co_await send_or_failure();
        continue;
      }
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      if (batch.empty()) due = clock_type::now() + flush_after;
      batch.emplace_back(line_no, std::move(line));
      if (static_cast<int>(batch.size()) >= batch_size ||
          (flush_after.count() > 0 && clock_type::now() >= due)) {
        failure = co_await send_or_failure();
      }
    }
    if (!bad_line && !not_json_line && failure.empty()) failure = co_await send_or_failure();
    if (too_long_line && failure.empty() && !bad_line && !not_json_line) {
      co_return report(exit_code::usage,
                       "line " + std::to_string(too_long_line) + " is longer than " +
                           std::to_string(line_reader::max_line) +
                           " bytes (what jsonb holds); stopped there: " + how_far() +
                           ", nothing after");
    }
    if (!failure.empty()) {
      co_return report(exit_code::failed, failure + "; " + how_far() + ", nothing after");
    }
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
      co_return report(exit_code::interrupted,
                       "interrupted by a signal: " + how_far() +
                           "; the rest of stdin was not read" +
                           (in.partial() ? " (nor line " + std::to_string(line_no + 1) +
                                               ", begun without its newline yet)"
                                         : ""));
    }
    if (in.error()) {
      co_return report(exit_code::usage,
                       "stdin could not be read " +
                           (line_no == 0 ? std::string("before line 1")
                                         : "after line " + std::to_string(line_no)) +
                           ": " + std::strerror(in.error()) + "; " + how_far());
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
      // A bad name is refused now, not when the first line comes (maybe hours later).
      std::string bad_name;
      try {
        co_await db.query("SELECT pgqueue.check_queue_name($1)", {args.queue});
      } catch (const pgqueue::error& e) {
        if (!refused_input(e)) throw;
        bad_name = std::string(e.what()) + " (SQLSTATE " + e.sqlstate() + ")";
      }
      if (!bad_name.empty()) co_return reader.report(exit_code::usage, bad_name);
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
