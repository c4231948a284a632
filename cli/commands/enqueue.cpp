// pgqueue enqueue QUEUE [JSON]: one job, or one per line of stdin, sent in batches.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../commands.hpp"

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

asio::awaitable<int> enqueue_stdin(const context& ctx, pgqueue::queue& q,
                                   const pgqueue::enqueue_options& opts, int batch_size) {
  progress bar;
  long enqueued = 0, line_no = 0;
  std::int64_t first_id = 0, last_id = 0;
  std::vector<std::string> batch;
  long batch_first_line = 1;
  auto send = [&]() -> asio::awaitable<void> {
    if (batch.empty()) co_return;
    std::vector<std::string> payloads;
    payloads.swap(batch);
    const auto n = static_cast<long>(payloads.size());
    std::vector<std::int64_t> ids;
    try {
      ids = co_await q.enqueue_batch(std::move(payloads), opts);
    } catch (const pgqueue::error&) {
      bar.update(enqueued, true);
      std::cerr << "pgqueue enqueue: lines " << batch_first_line << "-" << batch_first_line + n - 1
                << " failed, none of them enqueued; lines 1-" << batch_first_line - 1
                << " were enqueued (" << enqueued << " jobs), nothing after\n";
      throw;
    }
    if (first_id == 0 && !ids.empty()) first_id = ids.front();
    if (!ids.empty()) last_id = ids.back();
    enqueued += n;
    bar.update(enqueued);
  };
  std::string line;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!nlohmann::json::accept(line)) {
      co_await send();  // everything before this line goes in; nothing after
      bar.update(enqueued, true);
      std::cerr << "pgqueue enqueue: line " << line_no << " is not JSON; stopped there. Lines 1-"
                << line_no - 1 << " were enqueued (" << enqueued << " jobs), nothing after\n";
      co_return exit_code::usage;
    }
    if (batch.empty()) batch_first_line = line_no;
    batch.push_back(std::move(line));
    if (static_cast<int>(batch.size()) >= batch_size) co_await send();
  }
  co_await send();
  bar.update(enqueued, true);
  if (ctx.json) {
    nlohmann::json out{{"enqueued", enqueued}};
    if (enqueued > 0) {
      out["first_id"] = first_id;
      out["last_id"] = last_id;
    }
    std::cout << out.dump() << "\n";
  } else if (enqueued > 0) {
    std::cout << "enqueued " << enqueued << " jobs, ids " << first_id << "-" << last_id << "\n";
  } else {
    std::cout << "enqueued 0 jobs (stdin had no lines)\n";
  }
  co_return exit_code::ok;
}

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
    if (!args.payload) co_return co_await enqueue_stdin(ctx, q, opts, args.batch_size);
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
