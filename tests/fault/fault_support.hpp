// Shared pieces of the fault-injection suite: scaled job counts, filling a queue, counting
// handler runs, draining a queue with a pgqueue::worker while a fault runs on another thread,
// and the final accounting every fault test asserts and prints as one report line.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <pgqueue/pgqueue.hpp>

#include "support/session.hpp"

namespace pgq_fault {

using pgq_test::session;

// `jobs` scaled by PGQUEUE_FAULT_SCALE (percent, default 100; meson sets less under the
// sanitizers, where everything runs several times slower). At least 1.
std::int64_t scaled(std::int64_t jobs);

// The least time a drain or a production run under a fault lasts, however fast the machine:
// its work is paced to take this long (paced()), so that a fault acting on 300 ms old backends
// acts several times. Unpaced, a fast machine drained 5,000 jobs in 1.0 s: two terminations.
inline constexpr std::chrono::milliseconds fault_window{2500};

// How long each of `items` pieces of work done `parallel` at a time pauses: `work`, or longer
// where the run would otherwise end within `window`.
std::chrono::milliseconds paced(std::chrono::milliseconds work, std::int64_t items, int parallel,
                                std::chrono::milliseconds window = fault_window);

// `dsn` with application_name set (key=value conninfo or URI), so a fault can pick out the
// worker's backends in pg_stat_activity; a reconnect with the same conninfo keeps the name.
std::string with_application_name(const std::string& dsn, const std::string& name);

// The terminating fault: pg_terminate_backend of every backend of `application_name` in the
// database of `dsn` once it has lived `lifetime` (from its start, on the server's clock), until
// `finished` or for `at_most`, after which the rest runs unharmed. Ages, not a fixed period:
// each backend gets the same time to work however long the machine takes to start one (a
// period of killing everything stopped a fleet on a slow machine: sessions killed while still
// starting, each failed attempt doubling the reconnect backoff). And a bounded fault: on a
// loaded machine, where a new backend spends most of a short life planning its first
// statements, the drain still ends within its limit, after at least `at_most` of faults.
struct termination_fault {
  // Long enough for a new session to do real work on a loaded 2-core machine under the
  // sanitizers (a first claim_batch in a new backend plans all its statements: 30-50 ms on a
  // quiet one), short enough that a drain sees many terminations at every step of the
  // claim-run-ack cycle.
  std::chrono::milliseconds lifetime{300};
  // On a quiet machine the drains end sooner (11 to 400 terminations per test); on a loaded one
  // 15 s of faults bound each test's share of CI's 2 cores (30 s made the suite 27 minutes).
  std::chrono::seconds at_most{15};
};

struct terminations {
  termination_fault fault;
  std::int64_t terminated = 0;
  std::int64_t rounds = 0;  // kills that found at least one backend due
  double seconds = 0;       // how long the fault ran
  // "N backends terminated at L ms old, in R rounds over S s"
  std::string note() const;
};

terminations terminate_at_age(const std::string& dsn, const std::string& application_name,
                              const std::atomic<bool>& finished, termination_fault fault = {});

// Enqueues `n` jobs in one statement through the SQL API and returns their ids in claim order.
// `payload_sql` and `max_attempts_sql` are SQL expressions of g (1..n).
std::vector<std::int64_t> fill(session& s, const std::string& queue, std::int64_t n,
                               const std::string& payload_sql = "jsonb_build_object('i', g)",
                               const std::string& max_attempts_sql = "5");

// Handler runs per job in this process. record() is called on the worker's thread only;
// total() may be read from any thread (fault threads use it to time their fault).
class run_counter {
 public:
  void record(std::int64_t id) {
    ++runs_[id];
    total_.fetch_add(1, std::memory_order_relaxed);
  }
  std::int64_t total() const { return total_.load(std::memory_order_relaxed); }
  // Read once the worker has stopped.
  const std::map<std::int64_t, int>& runs() const { return runs_; }

 private:
  std::map<std::int64_t, int> runs_;
  std::atomic<std::int64_t> total_{0};
};

// One line per fault test: what was injected and what became of every job.
struct fault_report {
  std::string fault;
  std::int64_t enqueued = 0;
  std::int64_t done = 0;
  std::int64_t re_run = 0;  // handler runs beyond the first, summed over jobs
  std::int64_t dead = 0;
  std::int64_t ready = 0;  // still waiting (only where the test stops before the queue is empty)
  std::int64_t lost = 0;   // missing, left claimed, done without a run, or ready where not allowed
  std::int64_t extra_claims = 0;  // pgqueue.jobs.attempts beyond the first, summed over jobs
                                  // (>= re_run: a claim whose answer was lost ran nothing)
  double seconds = 0;
  std::string notes;  // fault-specific counts (terminations, kills, ...)

  std::string line() const;
  // Prints line() to stdout (the test log) at once.
  void print() const;
};

// A job's final row joined with its handler runs.
struct job_outcome {
  std::int64_t id = 0;
  std::string state;
  int attempts = 0;
  int max_attempts = 0;
  std::optional<std::string> last_error;
  std::optional<std::string> claimed_by;
  int runs = 0;
};

struct accounting {
  fault_report report;
  std::map<std::int64_t, job_outcome> jobs;  // by id, for the enqueued ids
  std::int64_t claimed = 0;                  // rows still claimed in the queue (any job)
  std::int64_t missing = 0;                  // enqueued ids with no row
  std::int64_t done_acks = 0;  // acks the server counted (pgqueue.done_counts) for the queue
};

// Reads the final state of `enqueued` jobs of `queue` and joins the handler run counts.
// With `ready_allowed` false (the test drained the queue), a ready job counts as lost.
accounting account(session& s, const std::string& fault, const std::string& queue,
                   const std::vector<std::int64_t>& enqueued,
                   const std::map<std::int64_t, int>& runs, bool ready_allowed = false);

// The assertions every fault test shares: nothing lost, nothing left claimed, every done job
// acked exactly once (the server's ack counter equals the done rows), and every re-run
// explained: the job's lease expired (the janitor's last_error says so) and it was claimed at
// least as often as it ran.
void check_accounting(const accounting& a);

// Runs per job from the run log (fault_runs), ordered by attempt, as (worker, attempt).
struct logged_run {
  std::string worker;
  int attempt = 0;
};
std::map<std::int64_t, std::vector<logged_run>> read_run_log(session& s);
// The same as counts, for account().
std::map<std::int64_t, int> run_counts(const std::map<std::int64_t, std::vector<logged_run>>& log);

// Draining a queue with one in-process worker while a fault runs.
struct drain_setup {
  std::string worker_dsn;  // the worker's connection
  std::string admin_dsn;   // the watcher's blocking session (reopened after failures)
  std::string queue = "q";
  std::int64_t jobs = 0;  // jobs in the queue: the drain ends when all are done or dead
  pgqueue::queue_options queue_options{};
  pgqueue::worker_options worker_options{};
  // Each handler run pauses this long, or longer: paced(handler_work, jobs, concurrency,
  // at_least), so that the drain lasts `at_least` however fast the machine.
  std::chrono::milliseconds handler_work{1};
  std::chrono::seconds limit{120};
  std::chrono::milliseconds at_least = fault_window;
  // The worker's queue is opened on a pool (of worker_dsn) and its handler runs in the job's
  // transaction: it inserts the job's id into the table `effects` (which the test creates,
  // with a unique job column) and the worker acks in that transaction.
  bool transactional = false;
  // Called on the worker's thread as each handler run starts (after `runs` recorded it), e.g.
  // to check what must hold when a job starts.
  std::function<void(const pgqueue::job&)> on_run{};
};

struct drain_outcome {
  pgqueue::worker_stats stats;
  bool drained = false;  // every job ended done or dead within the limit
  std::string failure;   // what run() threw, if it did
  double seconds = 0;
};

// Runs a pgqueue::worker (its handler records runs in `runs`) on an io_context of its own,
// while `fault` runs on a thread of its own until the flag it is given turns true. A watcher
// thread polls the database; once every job is done or dead (or run() failed, or the limit
// passed) it sets the flag, waits for `fault` to return, and only then stops the worker, so
// no fault hits the worker's shutdown.
drain_outcome drain_under_fault(const drain_setup& setup, run_counter& runs,
                                const std::function<void(const std::atomic<bool>&)>& fault);

// Prints the report of a drain_under_fault run (`fault_note` first, then the worker's stats)
// and makes the assertions such a run shares: run() did not fail, the queue drained, and
// check_accounting.
void report_drain(accounting& a, const drain_outcome& outcome, const std::string& fault_note);

// Exactly-once effects after a transactional drain (drain_setup::transactional): every done job
// of `queue` has its row in `effects`, and no row of `effects` belongs to a job not done.
// Returns a note for the report.
std::string check_effects(session& s, const std::string& queue);

// Seconds since `start`.
double seconds_since(std::chrono::steady_clock::time_point start);

}  // namespace pgq_fault
