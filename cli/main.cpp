// pgqueue: the command-line tool. Parses the command line (CLI11), resolves where to connect,
// runs one subcommand (commands/), and turns failures into a message and an exit code.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <iostream>
#include <limits>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "output.hpp"
#include "serve/serve.hpp"

namespace {

using namespace pgqueue_cli;

constexpr const char* exit_codes_text =
    "Exit codes: 0 done; 1 the answer is no (an upgrade is pending, no such job, not every job "
    "named could be retried or cancelled); 2 bad arguments or input, also when the server refuses "
    "it (nothing done; from stdin, everything before the line named); 3 the server or the "
    "connection failed, or the output could not be written (a server's error with its SQLSTATE; "
    "from stdin, the message says which lines are in); 4 interrupted by a signal (the message "
    "says how far it got; a second one while a batch waits at the server ends it at once).";

// A job id as given on the command line: a positive 64-bit integer, else a usage error.
std::int64_t job_id_of(const std::string& text) {
  std::int64_t id = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc{} || end != text.data() + text.size() || id < 1) {
    throw usage_error("not a job id: '" + printable(text) + "' (a positive 64-bit integer)");
  }
  return id;
}

std::vector<std::int64_t> job_ids_of(const std::vector<std::string>& texts) {
  std::vector<std::int64_t> ids;
  for (const auto& t : texts) ids.push_back(job_id_of(t));
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed descriptor 0-2 would be taken by the first file the tool opens (its I/O loop's
  // event descriptor), and stdin would read it, stdout write into it: /dev/null stands in.
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      const int null = ::open("/dev/null", O_RDWR);
      if (null > fd) {
        ::dup2(null, fd);
        ::close(null);
      }
    }
  }
  // A reader of stdout that went away is a failed write (checked at the end), not a signal
  // that ends the tool before it can say what it did.
  ::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"pgqueue: inspect and steer the job queues in a PostgreSQL database", "pgqueue"};
  app.footer(std::string("Connects to --dsn, else $PGQUEUE_DSN, else libpq's defaults and PG* "
                         "variables (PGHOST, PGDATABASE, ...).\n") +
             exit_codes_text);
  app.require_subcommand(1);
  context ctx;
  app.add_option("--dsn", ctx.dsn, "libpq connection string or URI")->envname("PGQUEUE_DSN");
  app.add_flag("--json", ctx.json, "print JSON for scripts instead of text");

  std::function<int()> action;

  bool check_only = false;
  auto* migrate_cmd =
      app.add_subcommand("migrate", "install the pgqueue schema, or upgrade it in place");
  migrate_cmd->add_flag("--check", check_only,
                        "only report whether an upgrade is pending (exit 1)");
  migrate_cmd->callback([&] { action = [&] { return migrate(ctx, check_only); }; });

  enqueue_args enq;
  auto* enqueue_cmd = app.add_subcommand(
      "enqueue", "add a job, or one per line of newline-delimited JSON on stdin");
  enqueue_cmd->add_option("queue", enq.queue, "queue name")->required();
  enqueue_cmd->add_option("payload", enq.payload, "the job's JSON (default: read stdin)");
  enqueue_cmd->add_option("--key", enq.key, "idempotency key (one job only)");
  enqueue_cmd->add_option("--priority", enq.priority, "higher runs sooner (default 0)");
  enqueue_cmd->add_option("--run-after", enq.run_after,
                          "not before this time (any PostgreSQL timestamptz, e.g. "
                          "'2026-12-24 18:00+01')");
  enqueue_cmd->add_option("--delay", enq.delay,
                          "not before this long from now (a PostgreSQL interval, e.g. '5 min')");
  enqueue_cmd->add_option("--max-attempts", enq.max_attempts, "runs at most this often (default 5)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  enqueue_cmd->add_option("--batch-size", enq.batch_size, "jobs per round trip from stdin (1000)")
      ->check(CLI::Range(1, 10000));
  enqueue_cmd
      ->add_option("--flush-after", enq.flush_after_ms,
                   "ms from a line on stdin until its batch is sent even if not full (100; "
                   "0: whenever stdin has nothing more ready)")
      ->check(CLI::Range(0, 3600000));
  enqueue_cmd
      ->add_option("--after", enq.after,
                   "ids of jobs to wait for (comma-separated): the job runs once all are done, "
                   "and ends dead (or cancelled) with one of them; from stdin, every job waits")
      ->delimiter(',')
      // Decimal ids only: CLI11 alone reads '' as 0, 0x10 as 16 and clamps a huge one.
      ->check(CLI::Validator(
          [](std::string& id) -> std::string {
            const bool digits =
                !id.empty() && id.find_first_not_of("0123456789") == std::string::npos;
            if (!digits || id.size() > 19 || (id.size() == 19 && id > "9223372036854775807")) {
              return "a job id is a decimal number up to 9223372036854775807, not '" + id + "'";
            }
            return {};
          },
          "ID"));
  enqueue_cmd->callback([&] { action = [&] { return enqueue(ctx, enq); }; });

  auto* queues_cmd = app.add_subcommand(
      "queues",
      "per queue: ready, scheduled, claimed, dead, cancelled, done, waiting, oldest age, lag");
  queues_cmd->alias("depth");
  queues_cmd->callback([&] { action = [&] { return queues(ctx); }; });

  std::string jobs_queue, jobs_state = "dead";
  int jobs_limit = 100;
  auto* jobs_cmd = app.add_subcommand("jobs", "list a queue's jobs in one state, oldest first");
  jobs_cmd->add_option("queue", jobs_queue, "queue name")->required();
  jobs_cmd->add_option("--state", jobs_state,
                       "ready, claimed, done, dead, cancelled or waiting (default dead)");
  jobs_cmd->add_option("--limit", jobs_limit, "at most this many (default 100)");
  jobs_cmd->callback(
      [&] { action = [&] { return jobs(ctx, jobs_queue, jobs_state, jobs_limit); }; });

  std::string job_id;
  auto* job_cmd = app.add_subcommand(
      "job",
      "one job: payload, attempts, holder, lease, the jobs it waits for, its last 10 failures");
  job_cmd->add_option("id", job_id, "the job's id")->required();
  job_cmd->callback([&] { action = [&] { return job(ctx, job_id_of(job_id)); }; });

  std::string retry_queue;
  std::vector<std::string> retry_ids;
  auto* retry_cmd = app.add_subcommand(
      "retry", "make dead jobs of a queue ready again (all of them, or the ids given)");
  retry_cmd->add_option("queue", retry_queue, "queue name")->required();
  retry_cmd->add_option("ids", retry_ids, "only these dead jobs");
  retry_cmd->callback(
      [&] { action = [&] { return retry(ctx, retry_queue, job_ids_of(retry_ids)); }; });

  std::vector<std::string> cancel_ids;
  auto* cancel_cmd = app.add_subcommand(
      "cancel",
      "cancel ready or waiting jobs, and the jobs waiting for them (claimed ones run on)");
  cancel_cmd->add_option("ids", cancel_ids, "job ids")->required();
  cancel_cmd->callback([&] { action = [&] { return cancel(ctx, job_ids_of(cancel_ids)); }; });

  std::string retain_done = "7 days", retain_dead = "30 days";
  auto* gc_cmd = app.add_subcommand("gc", "delete done and dead jobs older than their retention");
  gc_cmd->add_option("--retain-done", retain_done, "keep done jobs this long (default '7 days')");
  gc_cmd->add_option("--retain-dead", retain_dead, "keep dead jobs this long (default '30 days')");
  gc_cmd->callback([&] { action = [&] { return gc(ctx, retain_done, retain_dead); }; });

  std::string pause_queue;
  auto* pause_cmd = app.add_subcommand(
      "pause", "stop handing out a queue's jobs (it still accepts them; running jobs finish)");
  pause_cmd->add_option("queue", pause_queue, "queue name")->required();
  bool pause_force = false;
  pause_cmd->add_flag("--force", pause_force,
                      "pause it even if the database does not know it (no jobs yet)");
  pause_cmd->callback([&] { action = [&] { return pause(ctx, pause_queue, true, pause_force); }; });
  auto* resume_cmd = app.add_subcommand("resume", "hand out a paused queue's jobs again, at once");
  resume_cmd->add_option("queue", pause_queue, "queue name")->required();
  resume_cmd->callback([&] { action = [&] { return pause(ctx, pause_queue, false, true); }; });

  serve_options serve_opts;
  auto* serve_cmd = app.add_subcommand(
      "serve", "a live web dashboard of the queues, and Prometheus metrics at /metrics");
  serve_cmd->add_option("--listen", serve_opts.listen,
                        "HOST:PORT to listen on (default 127.0.0.1:8080; port 0: any free port)");
  serve_cmd->add_flag("--allow-actions", serve_opts.allow_actions,
                      "show retry, cancel, pause and resume buttons that work (default: "
                      "read-only, and the action endpoints answer 403)");
  serve_cmd->add_flag("--allow-remote", serve_opts.allow_remote,
                      "allow a --listen address other than loopback (127.0.0.1, [::1])");
  serve_cmd
      ->add_option("--interval", serve_opts.interval_s,
                   "seconds between readings for the rates and chart (default 2)")
      ->check(CLI::Range(0.2, 3600.0));
  serve_cmd->footer(
      "Prints 'listening on http://HOST:PORT/' and serves until SIGINT or SIGTERM (exit 0). "
      "Actions need the token the page carries (new at each start) in X-PGQueue-Token.");
  serve_cmd->callback([&] { action = [&] { return serve(ctx, serve_opts); }; });

  std::string role;
  auto* producer_cmd = app.add_subcommand(
      "grant-producer", "let a role enqueue (EXECUTE on the producer functions only)");
  producer_cmd->add_option("role", role, "role name")->required();
  producer_cmd->callback([&] { action = [&] { return grant(ctx, role, false); }; });
  auto* worker_cmd =
      app.add_subcommand("grant-worker", "let a role enqueue, claim, heartbeat, ack and nack");
  worker_cmd->add_option("role", role, "role name")->required();
  worker_cmd->callback([&] { action = [&] { return grant(ctx, role, true); }; });

  schedule_args sched;
  auto* schedule_cmd = app.add_subcommand(
      "schedule", "declare a periodic job: a job into QUEUE at each slot of CRON (idempotent)");
  schedule_cmd->add_option("name", sched.name, "the schedule's name")->required();
  schedule_cmd->add_option("queue", sched.queue, "queue name")->required();
  schedule_cmd
      ->add_option("cron", sched.cron,
                   "five cron fields, @hourly, @daily, ..., or '@every 30 seconds'")
      ->required();
  schedule_cmd->add_option("payload", sched.payload, "each job's JSON (default {})");
  schedule_cmd->add_option("--time-zone", sched.time_zone,
                           "the wall clock the cron fields are read in (default UTC)");
  schedule_cmd->add_option("--catch-up", sched.catch_up,
                           "after downtime: latest (one job for the missed slots, default) or "
                           "skip (none)");
  schedule_cmd->add_option("--priority", sched.priority, "higher runs sooner (default 0)");
  schedule_cmd
      ->add_option("--max-attempts", sched.max_attempts,
                   "each job runs at most this often (default 5)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  schedule_cmd->callback([&] { action = [&] { return schedule(ctx, sched); }; });
  auto* schedules_cmd =
      app.add_subcommand("schedules", "list the periodic jobs: cron, zone, next and last slot");
  schedules_cmd->callback([&] { action = [&] { return schedules(ctx); }; });
  std::string unschedule_name;
  auto* unschedule_cmd =
      app.add_subcommand("unschedule", "remove a periodic job (the jobs it enqueued stay)");
  unschedule_cmd->add_option("name", unschedule_name, "the schedule's name")->required();
  unschedule_cmd->callback([&] { action = [&] { return unschedule(ctx, unschedule_name); }; });

  limit_args lim;
  auto* limit_cmd = app.add_subcommand(
      "limit", "limit QUEUE fleet-wide: jobs claimed at once, jobs started per period");
  limit_cmd->add_option("queue", lim.queue, "queue name")->required();
  limit_cmd->add_option("--concurrency", lim.concurrency, "at most N of its jobs claimed at once")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  limit_cmd->add_option("--rate", lim.rate, "at most N of its jobs started per --per")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  limit_cmd->add_option("--per", lim.per, "the rate's period, an interval (default '1 second')");
  limit_cmd
      ->add_option("--burst", lim.burst,
                   "jobs that may start at once after a quiet spell "
                   "(default: the rate)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  limit_cmd->add_flag("--none", lim.none, "remove the queue's limits");
  limit_cmd->callback([&] { action = [&] { return limit(ctx, lim); }; });
  auto* limits_cmd = app.add_subcommand(
      "limits", "list the limited queues: limits, jobs claimed now, tokens in the bucket");
  limits_cmd->callback([&] { action = [&] { return limits(ctx); }; });

  top_args top_opts;
  auto* top_cmd = app.add_subcommand(
      "top", "the queues live: counts, age, lag and rates per queue (q quits; space: now)");
  top_cmd->add_option("--interval", top_opts.interval,
                      "seconds between readings (default 1; 0.1 to 3600)");
  auto* once_flag = top_cmd->add_flag("--once", top_opts.once, "print one frame and exit");
  top_cmd->add_option("--iterations", top_opts.iterations, "print this many frames, then exit")
      ->check(CLI::Range(1, 1000000000))
      ->excludes(once_flag);
  top_cmd->callback([&] { action = [&] { return top(ctx, top_opts); }; });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return exit_code::usage;
  }
  try {
    const int code = action();
    if (!(std::cout << std::flush)) {
      std::cerr << "pgqueue: cannot write the output (stdout)\n";
      return code == exit_code::ok ? exit_code::failed : code;
    }
    return code;
  } catch (const usage_error& e) {
    std::cerr << "pgqueue: " << printable(e.what()) << "\n";
    return exit_code::usage;
  } catch (const pgqueue::error& e) {
    std::cerr << "pgqueue: " << printable(e.what());
    if (!e.sqlstate().empty()) std::cerr << " (SQLSTATE " << e.sqlstate() << ")";
    std::cerr << "\n";
    // No schema, or an older one without what the command uses.
    if (e.sqlstate() == "42P01" || e.sqlstate() == "3F000" || e.sqlstate() == "42883") {
      std::cerr << "pgqueue: is the pgqueue schema installed and up to date? "
                   "'pgqueue migrate --check' tells\n";
    }
    return e.code() == pgqueue::errc::invalid_argument ||
                   e.code() == pgqueue::pg::errc::invalid_argument || refused_input(e)
               ? exit_code::usage
               : exit_code::failed;
  } catch (const std::exception& e) {
    std::cerr << "pgqueue: " << printable(e.what()) << "\n";
    return exit_code::failed;
  }
}
