// reference: pgbench driving the raw SQL on the same server, for the ratios. (a) claim_batch +
// ack_batch in one statement, 100 jobs, 4 clients; (b) the seed schema's claim_next + ack,
// 4 clients; (c) claim_next + ack on the current schema, 8 clients; (d) plain INSERTs into
// pgqueue.jobs with its trigger disabled: one row per statement at 1 and 8 clients, and 100 or
// 1000 rows per statement (what enqueue_batch inserts) at 1 client. Jobs are counted from the
// table, not from pgbench's transaction count. References always use the schema as shipped
// (never --after-migrate).
#include <fstream>
#include <sstream>
#include <string>

#include "../support/pgbench.hpp"
#include "../support/progress.hpp"
#include "../support/server.hpp"
#include "scenarios.hpp"

namespace bench {
namespace {

const char* const claim_batch_sql =
    "SELECT pgqueue.ack_batch(array_agg(id), 'w', array_agg(attempts)) "
    "FROM pgqueue.claim_batch('bench', 'w', 100);\n";
const char* const claim_next_sql =
    "SELECT id, attempts FROM pgqueue.claim_next('bench', 'w') \\gset\n"
    "SELECT pgqueue.ack(:id, 'w', :attempts);\n";
const char* const seed_claim_next_sql =  // the seed's ack has no attempt argument
    "SELECT id, attempts FROM pgqueue.claim_next('bench', 'w') \\gset\n"
    "SELECT pgqueue.ack(:id, 'w');\n";

std::string insert_sql(int rows) {
  if (rows == 1) {
    return std::string("INSERT INTO pgqueue.jobs (queue, payload) VALUES ('bench', '") +
           bench_payload + "');\n";
  }
  // The payloads as one jsonb[] literal, as enqueue_batch receives them.
  std::string element = "\"";
  for (const char* c = bench_payload; *c; ++c) {
    if (*c == '"' || *c == '\\') element += '\\';
    element += *c;
  }
  element += '"';
  std::string array = "{";
  for (int i = 0; i < rows; ++i) array += (i ? "," : "") + element;
  array += "}";
  return "INSERT INTO pgqueue.jobs (queue, payload) SELECT 'bench', p FROM unnest('" + array +
         "'::jsonb[]) AS p;\n";
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs pgbench and turns the change in the count of `state` jobs into a row.
// (Arguments by reference, built by the caller as named objects: GCC 12 destroys temporaries
// made inside a co_await expression twice.)
asio::awaitable<void> measure_pgbench(context& ctx, const pgqueue::database& db,
                                      const std::string& dsn, const std::string& state, row& r,
                                      const std::string& script, int clients) {
  const auto before = co_await count_jobs(db, state);
  say("reference", r.tag + " " + r.label + " (" + std::to_string(ctx.opt.seconds) + " s)");
  auto p = run_pgbench(ctx.opt, dsn, script, clients, ctx.opt.seconds);
  const auto after = co_await count_jobs(db, state);
  r.rate = static_cast<double>(after - before) / ctx.opt.seconds;
  if (p.exit_code != 0) {
    r.note = "pgbench exited with " + std::to_string(p.exit_code);
    std::fprintf(stderr, "%s\n", p.output.c_str());
  }
  if (state == "done" && co_await count_jobs(db, "ready") == 0) {
    r.note += std::string(r.note.empty() ? "" : "; ") + "queue ran dry: a lower bound";
  }
  ctx.rep.add(r);
}

row ref_row(std::string id, std::string tag, std::string label) {
  row r{std::move(id), "reference", std::move(label)};
  r.tag = std::move(tag);
  return r;
}

}  // namespace

void run_reference(context& ctx) {
  const int secs = ctx.opt.seconds;
  const std::string done = "done", ready = "ready";
  run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
    {  // (a) the batch functions: the raw-SQL ceiling of a drain
      const std::string name = "pgqueue_bench_ref_batch";
      auto db = co_await fresh_database(ctx.opt, name, true, false);
      const long fill = std::max(100000L, 150000L * secs);
      say("reference", "(a) filling " + std::to_string(fill) + " jobs");
      co_await fill_ready(db, fill);
      auto r =
          ref_row("ref.batch", "(a)", "claim_batch(100)+ack_batch in one statement, pgbench -c 4");
      const auto dsn = with_dbname(ctx.opt.dsn, name);
      const std::string script = claim_batch_sql;
      co_await measure_pgbench(ctx, db, dsn, done, r, script, 4);
      db.close();
      co_await drop_database(ctx.opt, name);
    }
    {  // (b) the seed's design
      const std::string name = "pgqueue_bench_ref_seed";
      auto db = co_await fresh_database(ctx.opt, name, false);
      co_await db.execute_script(read_file(ctx.opt.seed_schema));
      const long fill = 20000L + 3000L * secs;
      say("reference", "(b) seed schema, filling " + std::to_string(fill) + " jobs");
      co_await db.execute_script("ALTER TABLE pgqueue.jobs DISABLE TRIGGER jobs_notify_insert");
      co_await db.query(
          "INSERT INTO pgqueue.jobs (queue, payload) SELECT $1, $2::jsonb "
          "FROM generate_series(1, $3::int)",
          {bench_queue, bench_payload, fill});
      co_await db.execute_script("ALTER TABLE pgqueue.jobs ENABLE TRIGGER jobs_notify_insert");
      co_await settle(db);
      auto r = ref_row("ref.seed", "(b)", "seed schema: claim_next + ack, pgbench -c 4");
      const auto dsn = with_dbname(ctx.opt.dsn, name);
      const std::string script = seed_claim_next_sql;
      co_await measure_pgbench(ctx, db, dsn, done, r, script, 4);
      db.close();
      co_await drop_database(ctx.opt, name);
    }
    {  // (c) claim_next + ack on the current schema
      const std::string name = "pgqueue_bench_ref_claim_next";
      auto db = co_await fresh_database(ctx.opt, name, true, false);
      const long fill = 20000L + 3000L * secs;
      say("reference", "(c) filling " + std::to_string(fill) + " jobs");
      co_await fill_ready(db, fill);
      auto r = ref_row("ref.claim_next", "(c)", "claim_next + ack, pgbench -c 8");
      const auto dsn = with_dbname(ctx.opt.dsn, name);
      const std::string script = claim_next_sql;
      co_await measure_pgbench(ctx, db, dsn, done, r, script, 8);
      db.close();
      co_await drop_database(ctx.opt, name);
    }
    {  // (d) plain inserts without the wake-up trigger
      const std::string name = "pgqueue_bench_ref_insert";
      auto db = co_await fresh_database(ctx.opt, name, true, false);
      co_await db.execute_script("ALTER TABLE pgqueue.jobs DISABLE TRIGGER jobs_notify_insert");
      const auto dsn = with_dbname(ctx.opt.dsn, name);
      struct insert_case {
        const char* id;
        const char* tag;
        const char* label;
        int rows, clients;
      };
      const insert_case cases[] = {
          {"ref.insert.c1", "(d1)", "INSERT one row, no trigger, pgbench -c 1", 1, 1},
          {"ref.insert.c8", "(d8)", "INSERT one row, no trigger, pgbench -c 8", 1, 8},
          {"ref.insert.batch100", "(d100)", "INSERT 100 rows (unnest jsonb[]), pgbench -c 1", 100,
           1},
          {"ref.insert.batch1000", "(d1000)", "INSERT 1000 rows (unnest jsonb[]), pgbench -c 1",
           1000, 1},
      };
      for (const auto& c : cases) {
        co_await reset_jobs(db);
        co_await settle(db);
        auto r = ref_row(c.id, c.tag, c.label);
        const auto script = insert_sql(c.rows);
        co_await measure_pgbench(ctx, db, dsn, ready, r, script, c.clients);
      }
      db.close();
      co_await drop_database(ctx.opt, name);
    }
  });
}

}  // namespace bench
