// The pgqueue tool's subcommands: each parses nothing itself (main.cpp does, with CLI11) and
// returns an exit code (context.hpp). Declared here, one file per group under commands/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "context.hpp"

namespace pgqueue_cli {

// commands/schema.cpp
int migrate(const context& ctx, bool check_only);
int grant(const context& ctx, const std::string& role, bool worker);

// commands/enqueue.cpp
struct enqueue_args {
  std::string queue;
  std::optional<std::string> payload;  ///< none: newline-delimited JSON from stdin
  std::optional<std::string> key;
  int priority = 0;
  std::optional<std::string> run_after;  ///< a timestamptz as PostgreSQL reads it
  std::optional<std::string> delay;      ///< an interval as PostgreSQL reads it
  int max_attempts = 5;
  int batch_size = 1000;
  int flush_after_ms = 100;  ///< a partial batch from stdin goes this long after its first line
  std::vector<std::int64_t> after;  ///< ids every job waits for (--after)
};
int enqueue(const context& ctx, const enqueue_args& args);

// commands/inspect.cpp
int queues(const context& ctx);
int jobs(const context& ctx, const std::string& queue, const std::string& state, int limit);
int job(const context& ctx, std::int64_t id);

// commands/schedule.cpp
struct schedule_args {
  std::string name, queue, cron;
  std::string payload = "{}";
  std::string time_zone = "UTC";
  std::string catch_up = "latest";
  int priority = 0;
  int max_attempts = 5;
};
int schedule(const context& ctx, const schedule_args& args);
int schedules(const context& ctx);
int unschedule(const context& ctx, const std::string& name);

// commands/limits.cpp
struct limit_args {
  std::string queue;
  std::optional<int> concurrency, rate, burst;
  std::string per = "1 second";
  bool none = false;
};
int limit(const context& ctx, const limit_args& args);
int limits(const context& ctx);

// commands/control.cpp
int retry(const context& ctx, const std::string& queue, const std::vector<std::int64_t>& ids);
int cancel(const context& ctx, const std::vector<std::int64_t>& ids);
int gc(const context& ctx, const std::string& retain_done, const std::string& retain_dead);
/// `force`: pause a queue the database does not know yet (no jobs: e.g. before a deploy).
int pause(const context& ctx, const std::string& queue, bool paused, bool force);

// commands/top.cpp
struct top_args {
  double interval = 1;  ///< seconds between readings (0.1 to 3600)
  int iterations = 0;   ///< frames to print, then exit; 0: until 'q' or a signal
  bool once = false;    ///< one frame (no rates)
};
int top(const context& ctx, const top_args& args);

}  // namespace pgqueue_cli
