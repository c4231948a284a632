// Claim floors (pgqueue.ready_floor): claims start past the dead index entries that claimed jobs
// leave behind a long transaction, and no ready job is ever passed: not one committed late with
// an older run_after, not one made ready again (release, nack, janitor, retry_dead), not under
// concurrent producers, claimers and floor moves.
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include <catch2/catch.hpp>

#include "support/cluster.hpp"
#include "support/database.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace sql_floor_test {

using namespace pgq_test;

namespace {

// The floor of (queue, priority 0) as "run_after|id", run_after in epoch seconds.
std::string floor_of(session& s, const std::string& queue) {
  return *s.scalar(
      "SELECT extract(epoch FROM run_after) || '|' || id FROM pgqueue.ready_floor "
      "WHERE queue = $1 AND priority = 0",
      {queue});
}

// Moves the queue's floors now (claims do it at most once a second).
void move_floor(session& s, const std::string& queue) {
  s.query("SELECT pgqueue.floor_advance($1)", {queue});
}

std::int64_t claim_one(session& s, const std::string& queue) {
  auto got = claim(s, queue, "w");
  REQUIRE(got.size() == 1);
  return got[0].id;
}

// Claims and acks until the queue has nothing due; returns the ids in claim order.
std::vector<std::int64_t> drain(session& s, const std::string& queue) {
  std::vector<std::int64_t> order;
  for (auto got = claim(s, queue, "w"); !got.empty(); got = claim(s, queue, "w")) {
    order.push_back(got[0].id);
    s.query("SELECT pgqueue.ack($1, 'w', $2)",
            {std::to_string(got[0].id), std::to_string(got[0].lease_token)});
  }
  return order;
}

// A queue that had a job and has none ready: its floor exists, below nothing.
void drained(session& s, const std::string& queue) {
  enqueue(s, queue);
  drain(s, queue);
}

// Moves the queue's floors in a transaction left open, as a claim that is the first statement
// of a longer transaction does.
void begin_move(session& s, const std::string& queue) {
  s.query("BEGIN");
  move_floor(s, queue);
}

// For a session that must not wait for a lock: the wait fails (57014) instead of hanging.
void no_waiting(session& s) {
  s.query("SET statement_timeout = '2s'");
}

// How many entries of the ready index one claim of `queue` reads (the claim is rolled back; the
// floor is not moved by it).
std::int64_t ready_entries_read_by_a_claim(session& s, const std::string& queue) {
  // The entries index scans of this session returned and did not report yet (idx_tup_read).
  auto returned = [&] {
    return s.integer("SELECT pg_stat_get_xact_tuples_returned('pgqueue.jobs_ready_idx'::regclass)");
  };
  s.query("BEGIN");
  s.query("UPDATE pgqueue.ready_floor SET moved_at = now() WHERE queue = $1", {queue});
  const auto before = returned();
  claim_one(s, queue);
  const auto read = returned() - before;
  s.query("ROLLBACK");
  return read;
}

}  // namespace

TEST_CASE("behind a long transaction, a claim reads no dead index entry below the floor",
          "[floor]") {
  scratch_database db;
  session s(db.dsn());
  session pin(db.dsn());
  // A snapshot older than every claim below: vacuum may not remove what they leave behind.
  pin.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
  pin.query("SELECT 1");
  s.query("SELECT pgqueue.enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[201]))");
  s.query(
      "SELECT pgqueue.ack_batch(array_agg(id), 'w', array_agg(lease_token)) "
      "FROM pgqueue.claim_batch('q', 'w', 200)");

  move_floor(s, "q");
  CHECK(ready_entries_read_by_a_claim(s, "q") == 1);  // the one ready job, first
  // The same claim from the head of the index reads the 200 entries the claims left dead.
  s.query("UPDATE pgqueue.ready_floor SET run_after = '-infinity', id = 0 WHERE queue = 'q'");
  CHECK(ready_entries_read_by_a_claim(s, "q") == 201);
  pin.query("ROLLBACK");
}

TEST_CASE("a job committed late with an older run_after is claimed before later ones", "[floor]") {
  scratch_database db;
  session s(db.dsn());
  session late(db.dsn());
  drained(s, "q");
  move_floor(s, "q");  // the queue's floor exists, below nothing

  late.query("BEGIN");
  const auto x = enqueue(late, "q");  // run_after: this call's time
  const auto y = enqueue(s, "q");
  const auto before = floor_of(s, "q");
  move_floor(s, "q");
  CHECK(floor_of(s, "q") == before);  // not moved while a transaction that adds jobs is open
  CHECK(claim_one(s, "q") == y);
  move_floor(s, "q");
  CHECK(floor_of(s, "q") == before);
  const auto z = enqueue(s, "q");
  late.query("COMMIT");

  CHECK(drain(s, "q") == std::vector<std::int64_t>{x, z});
}

TEST_CASE("a job enqueued due in the past after the floor moved is claimed first", "[floor]") {
  scratch_database db;
  session s(db.dsn());
  enqueue(s, "q");
  claim_one(s, "q");
  const auto later = enqueue(s, "q");
  move_floor(s, "q");
  const auto overdue =
      s.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now() - interval '1 hour')");
  CHECK(drain(s, "q") == std::vector<std::int64_t>{overdue, later});
}

// enqueue_batch admits its jobs itself (the insert trigger stands aside): by its first drawn
// id, also when a key turned that one away.
TEST_CASE("a batch enqueued due in the past after the floor moved is claimed first", "[floor]") {
  const bool keyed = GENERATE(false, true);
  CAPTURE(keyed);
  scratch_database db;
  session s(db.dsn());
  const auto held = s.integer("SELECT pgqueue.enqueue('q', '{}', 'k1')");
  CHECK(claim_one(s, "q") == held);
  const auto later = enqueue(s, "q");
  move_floor(s, "q");
  const std::string keys = keyed ? "ARRAY['k1', 'k2']" : "NULL";
  const auto ids = s.query("SELECT unnest(pgqueue.enqueue_batch('q', ARRAY['{}', '{}']::jsonb[], " +
                           keys + ", 0, now() - interval '1 hour'))");
  std::vector<std::int64_t> expected;  // the batch's new jobs ('k1' names the claimed one)
  for (const auto& r : ids) {
    if (std::stoll(*r[0]) != held) expected.push_back(std::stoll(*r[0]));
  }
  REQUIRE(expected.size() == (keyed ? 1u : 2u));
  expected.push_back(later);
  CHECK(drain(s, "q") == expected);
}

namespace {

// The floors and the jobs noted below them, of every queue: "floors|noted".
std::string floors_and_notes(session& s) {
  return *s.scalar(
      "SELECT (SELECT count(*) FROM pgqueue.ready_floor) || '|' || "
      "(SELECT count(*) FROM pgqueue.ready_floor_below)");
}

}  // namespace

TEST_CASE("a priority's first enqueue makes its floor: a backlog before any claim is not noted",
          "[floor]") {
  scratch_database db;
  session s(db.dsn());
  session other(db.dsn());
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 50; ++i) {
    ids.push_back(enqueue(s, "q"));
    ids.push_back(enqueue(other, "q"));
  }
  CHECK(floors_and_notes(s) == "1|0");
  CHECK(*s.scalar("SELECT run_after::text || '|' || id FROM pgqueue.ready_floor") == "-infinity|0");
  // enqueue_batch (through the insert trigger) makes a new priority's floor the same way.
  const auto urgent = s.integer(
      "SELECT (pgqueue.enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[3]), NULL, 5))[1]");
  CHECK(floors_and_notes(s) == "2|0");
  auto order = drain(s, "q");
  REQUIRE(order.size() == ids.size() + 3);
  CHECK(order[0] == urgent);
  CHECK(std::vector<std::int64_t>(order.begin() + 3, order.end()) == ids);
}

TEST_CASE("a producer that cannot make the floor at once notes its job, without waiting",
          "[floor]") {
  scratch_database db;
  session s(db.dsn());
  session p1(db.dsn());
  session p2(db.dsn());
  p1.query("BEGIN");
  const auto first = enqueue(p1, "q");  // makes the floor; its row is not committed yet
  no_waiting(p2);
  CHECK(p2.error_of("SELECT pgqueue.enqueue('q', '{}')") == "");
  CHECK(floors_and_notes(s) == "0|1");
  p1.query("COMMIT");
  CHECK(floors_and_notes(s) == "1|1");
  const auto second = s.integer("SELECT max(id) FROM pgqueue.jobs");
  CHECK(drain(s, "q") == std::vector<std::int64_t>{first, second});
}

TEST_CASE("after a rolled-back first enqueue, the next job of the priority is claimable",
          "[floor]") {
  scratch_database db;
  session s(db.dsn());
  s.query("BEGIN");
  enqueue(s, "q");  // makes the floor, and this session notes that it exists
  s.query("ROLLBACK");
  const auto id = enqueue(s, "q");
  CHECK(floors_and_notes(s) == "1|0");
  CHECK(claim_one(s, "q") == id);
}

TEST_CASE("after a prepared first enqueue is rolled back, the next job is claimable", "[floor]") {
  // PREPARE TRANSACTION keeps the session's settings, ROLLBACK PREPARED undoes the floor.
  cluster_options options;
  options.config_lines = {"max_prepared_transactions = 2"};
  throwaway_cluster cluster(options);
  session s(cluster.dsn());
  s.script(read_file(schema_file()));
  s.query("BEGIN");
  s.query("SELECT pgqueue.enqueue('q', '{}', p_wake => false)");  // NOTIFY cannot be prepared
  s.query("PREPARE TRANSACTION 'first'");
  s.query("ROLLBACK PREPARED 'first'");
  const auto id = enqueue(s, "q");
  CHECK(floors_and_notes(s) == "1|0");
  CHECK(claim_one(s, "q") == id);
}

TEST_CASE("a child due later, released in a priority without a floor, is claimed when due",
          "[floor]") {
  scratch_database db;
  session s(db.dsn());
  const auto parent = enqueue(s, "parents");
  const auto child = s.integer(
      "SELECT pgqueue.enqueue('children', '{}', NULL, 0, now() + interval '300 milliseconds', 5, "
      "true, ARRAY[$1::bigint])",
      {std::to_string(parent)});
  auto got = claim(s, "parents", "w");
  REQUIRE(got.size() == 1);
  s.query("SELECT pgqueue.ack($1, 'w', $2)",
          {std::to_string(parent), std::to_string(got[0].lease_token)});
  // Due within 300 ms of its enqueue: claimed within 3 s, polling as an idle worker would.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::vector<claimed> child_claim;
  while (child_claim.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    child_claim = claim(s, "children", "w");
  }
  REQUIRE(child_claim.size() == 1);
  CHECK(child_claim[0].id == child);
}

TEST_CASE("an enqueue in REPEATABLE READ makes no floor: its job is noted below", "[floor]") {
  scratch_database db;
  session s(db.dsn());
  s.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
  const auto id = enqueue(s, "q");
  s.query("COMMIT");
  CHECK(floors_and_notes(s) == "0|1");
  CHECK(claim_one(s, "q") == id);
}

TEST_CASE("jobs made ready again are claimed after the floor passed them", "[floor]") {
  scratch_database db;
  session s(db.dsn());
  const auto id = enqueue(s, "q");
  const auto sid = std::to_string(id);
  auto hold_and_empty = [&] {
    auto got = claim(s, "q", "w");
    REQUIRE(got.size() == 1);
    move_floor(s, "q");  // nothing ready: the floor goes above the job
    CHECK(*s.scalar("SELECT (f.run_after, f.id) > (j.run_after, j.id) FROM pgqueue.ready_floor f, "
                    "pgqueue.jobs j WHERE f.queue = 'q' AND j.id = $1",
                    {std::to_string(id)}) == "t");
    return std::to_string(got[0].lease_token);
  };

  auto token = hold_and_empty();
  CHECK(*s.scalar("SELECT pgqueue.release($1, 'w', $2)", {sid, token}) == "t");
  CHECK(claim_one(s, "q") == id);
  s.query("SELECT pgqueue.release($1, 'w')", {sid});

  token = hold_and_empty();
  CHECK(*s.scalar("SELECT pgqueue.nack($1, 'w', 'again', '0 s', $2)", {sid, token}) == "requeued");
  CHECK(claim_one(s, "q") == id);
  s.query("SELECT pgqueue.release($1, 'w')", {sid});

  hold_and_empty();
  CHECK(take_back(s, id) == 1);
  CHECK(claim_one(s, "q") == id);

  // The last attempt fails: dead, then retried.
  s.query("UPDATE pgqueue.jobs SET max_attempts = attempts WHERE id = $1", {sid});
  CHECK(*s.scalar("SELECT pgqueue.nack($1, 'w', 'last')", {sid}) == "dead");
  move_floor(s, "q");
  CHECK(s.integer("SELECT pgqueue.retry_dead('q')") == 1);
  CHECK(claim_one(s, "q") == id);
}

TEST_CASE("an enqueue in REPEATABLE READ from before a floor move is claimed first", "[floor]") {
  scratch_database db;
  session s(db.dsn());
  session rr(db.dsn());
  session other(db.dsn());
  drained(s, "q");
  rr.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
  rr.query("SELECT 1");  // its snapshot, and now()
  const auto later = enqueue(s, "q");
  move_floor(s, "q");  // to `later`, after that snapshot
  // Due before its transaction began: older than `later`, below the floor its snapshot missed.
  const auto id =
      rr.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now() - interval '1 millisecond')");
  // Another producer of the queue does not wait for it.
  no_waiting(other);
  CHECK(other.error_of("SELECT pgqueue.enqueue('q', '{}')") == "");
  rr.query("COMMIT");
  CHECK(claim_one(s, "q") == id);
  CHECK(claim_one(s, "q") == later);
}

// A claim that is the first statement of a longer transaction may move the floors, and holds
// the floor lock until that transaction ends: the queue's producers go on meanwhile.
TEST_CASE("producers do not wait for a floor move whose transaction is open", "[floor]") {
  scratch_database db;
  session s(db.dsn());
  session mover(db.dsn());
  session p(db.dsn());
  drained(s, "q");
  const auto first = enqueue(s, "q");
  begin_move(mover, "q");  // to `first`; the transaction stays open
  no_waiting(p);
  // Due now; due in the past (below the floor the move is writing); a priority without a
  // floor; a direct INSERT and a batch, both due in the past.
  const auto now_id = enqueue(p, "q");
  const auto past = p.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now() - interval '1 h')");
  const auto urgent = enqueue(p, "q", "{}", std::nullopt, 5);
  const auto direct = p.integer(
      "INSERT INTO pgqueue.jobs (queue, payload, run_after) "
      "VALUES ('q', '{}', now() - interval '2 h') RETURNING id");
  const auto batch = p.integer(
      "SELECT (pgqueue.enqueue_batch('q', ARRAY['{}']::jsonb[], NULL, 0, "
      "now() - interval '30 min'))[1]");
  const auto batch_now = p.integer("SELECT (pgqueue.enqueue_batch('q', ARRAY['{}']::jsonb[]))[1]");
  // Noted below: what is due before the call, and the priority without a floor; not what is
  // due now (the move's floor stays below the time of the call).
  CHECK(floors_and_notes(s) == "1|4");
  mover.query("COMMIT");
  CHECK(drain(s, "q") ==
        std::vector<std::int64_t>{urgent, direct, past, batch, first, now_id, batch_now});
}

TEST_CASE("a producer that did not wait for a floor move holds back the next move", "[floor]") {
  scratch_database db;
  session s(db.dsn());
  session mover(db.dsn());
  session p(db.dsn());
  drained(s, "q");
  move_floor(s, "q");
  begin_move(mover, "q");
  no_waiting(p);
  p.query("BEGIN");
  const auto id = enqueue(p, "q");  // due now: above that move's floor, not noted
  mover.query("COMMIT");
  const auto before = floor_of(s, "q");
  move_floor(s, "q");  // its snapshot misses the job, so it must not run
  CHECK(floor_of(s, "q") == before);
  // Nor does it keep the floor lock while its transaction stays open: neither a pause nor the
  // next move waits for it.
  session skipped(db.dsn());
  begin_move(skipped, "q");
  p.query("COMMIT");
  no_waiting(s);
  CHECK(s.error_of("SELECT pgqueue.pause('q')") == "");
  s.query("SELECT pgqueue.resume('q')");
  move_floor(s, "q");
  CHECK(floor_of(s, "q") != before);
  skipped.query("COMMIT");
  CHECK(drain(s, "q") == std::vector<std::int64_t>{id});
}

TEST_CASE("a session that knew a priority's floor enqueues claimable jobs after a reinstall",
          "[floor]") {
  scratch_database db;
  session s(db.dsn());
  enqueue(s, "q");
  move_floor(s, "q");
  enqueue(s, "q");  // the floor exists: this session remembers it
  s.script("DROP SCHEMA pgqueue CASCADE");
  s.script(read_file(schema_file()));
  const auto id = enqueue(s, "q");  // the new schema has no floor yet
  CHECK(claim_one(s, "q") == id);
}

TEST_CASE("a session remembers floors in at most 256 settings whatever the number of queues",
          "[floor]") {
  // (One setting per queue and priority made each new queue slower to enqueue into: 1.7 ms a
  // call once a session knew 8,000, as PostgreSQL sorts a session's settings for each new one.)
  scratch_database db;
  session admin(db.dsn());
  session s(db.dsn());
  admin.query("SELECT pgqueue.enqueue('t' || i, '{}') FROM generate_series(1, 1000) i");
  for (int i = 1; i <= 1000; ++i) enqueue(s, "t" + std::to_string(i));  // each floor is known
  const auto slots_used = s.integer(
      "SELECT count(current_setting('pgqueue.floor_known_' || n, true)) "
      "FROM generate_series(0, 255) n");
  CHECK(slots_used > 200);
  CHECK(slots_used <= 256);
  // Not under a name of its own, as before.
  CHECK_FALSE(
      s.scalar("SELECT current_setting('pgqueue.floor_known_0_' || "
               "'pgqueue.ready_floor'::regclass::oid || '_' || "
               "encode(textsend('t1'::text), 'hex'), true)"));
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.ready_floor_below") == 0);
  CHECK(drain(admin, "t1").size() == 2);
}

TEST_CASE("a queue whose remembered slot holds another queue's floor still makes its own",
          "[floor]") {
  scratch_database db;
  session admin(db.dsn());
  session s(db.dsn());
  // Two queue names in the same slot of the session's memory (priority 0).
  const auto pair = admin.query(
      "SELECT a.q, b.q FROM (SELECT 'a' || i AS q FROM generate_series(1, 300) i) a "
      "JOIN (SELECT 'b' || i AS q FROM generate_series(1, 300) i) b "
      "ON hashtext(a.q) & 255 = hashtext(b.q) & 255 ORDER BY a.q, b.q LIMIT 1");
  REQUIRE(pair.size() == 1);
  const std::string a = *pair[0][0], b = *pair[0][1];
  enqueue(admin, a);              // a's floor, made by another session
  const auto a1 = enqueue(s, a);  // s remembers it in the slot
  const auto b1 = enqueue(s, b);  // b has no floor: the slot must not stand for it
  const auto a2 = enqueue(s, a);  // and a's is looked up again
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.ready_floor WHERE queue IN ($1, $2)", {a, b}) ==
        2);
  CHECK(drain(admin, b) == std::vector<std::int64_t>{b1});
  CHECK(drain(admin, a).size() == 3);
  CHECK(a2 > a1);
}

TEST_CASE("producers of drained queues do not wait for each other's open transactions", "[floor]") {
  scratch_database db;
  session s(db.dsn());
  session p1(db.dsn());
  session p2(db.dsn());
  for (const char* q : {"x1", "x2"}) {
    drained(s, q);
    move_floor(s, q);  // drained: the floor is above every job there was
  }
  // Opposite orders, both transactions open: neither waits (a deadlock before).
  p1.query("BEGIN");
  p2.query("BEGIN");
  p1.query("SET LOCAL statement_timeout = '2s'");
  p2.query("SET LOCAL statement_timeout = '2s'");
  enqueue(p1, "x1");
  enqueue(p2, "x2");
  CHECK(p1.error_of("SELECT pgqueue.enqueue('x2', '{}')") == "");
  CHECK(p2.error_of("SELECT pgqueue.enqueue('x1', '{}')") == "");
  // Nor does the janitor, nor a claim of another queue, nor release.
  no_waiting(s);
  CHECK(s.error_of("SELECT pgqueue.janitor_reset_stale_claims()") == "");
  p1.query("COMMIT");
  p2.query("COMMIT");
  CHECK(drain(s, "x1").size() == 2);
  CHECK(drain(s, "x2").size() == 2);
}

TEST_CASE("producers, claimers and floor moves at once: every job claimed exactly once",
          "[floor]") {
  scratch_database db;
  const int producers = 3, per_producer = 200;
  std::atomic<int> produced_done{0};
  std::atomic<bool> stop{false};
  std::mutex m;
  std::map<std::int64_t, int> acked;  // id -> how many acks succeeded
  std::vector<std::string> errors;
  auto guard = [&](auto body) {
    return [&, body] {
      try {
        body();
      } catch (const std::exception& e) {
        std::lock_guard lock(m);
        errors.push_back(e.what());
        stop = true;
      }
    };
  };
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back(guard([&, p] {
      session s(db.dsn());
      for (int i = 0; i < per_producer && !stop; ++i) {
        // Two priorities; every fifth job due in the past, below wherever the floor is; every
        // seventh a direct INSERT (the insert trigger admits it).
        const auto when = i % 5 == 0 ? "now() - interval '1 minute'" : "now()";
        const auto priority = std::to_string((i + p) % 2);
        if (i % 7 == 0) {
          s.query(std::string("INSERT INTO pgqueue.jobs (queue, payload, priority, run_after) "
                              "VALUES ('q', '{}', $1, ") +
                      when + ")",
                  {priority});
        } else {
          s.query(std::string("SELECT pgqueue.enqueue('q', '{}', NULL, $1, ") + when + ")",
                  {priority});
        }
      }
      ++produced_done;
    }));
  }
  // A job passed by the floors would never be claimed: give up then instead of waiting forever.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int c = 0; c < 3; ++c) {
    threads.emplace_back(guard([&] {
      session s(db.dsn());
      while (!stop && std::chrono::steady_clock::now() < give_up) {
        auto got = claim(s, "q", "w", 5);
        if (got.empty() && produced_done == producers) {
          if (count_jobs(s, "ready", "q") == 0) break;
        }
        for (auto& j : got) {
          const bool ok = *s.scalar("SELECT pgqueue.ack($1, 'w', $2)",
                                    {std::to_string(j.id), std::to_string(j.lease_token)}) == "t";
          std::lock_guard lock(m);
          acked[j.id] += ok ? 1 : 0;
        }
      }
    }));
  }
  threads.emplace_back(guard([&] {
    session s(db.dsn());
    while (!stop && produced_done < producers) move_floor(s, "q");
  }));
  // Moves whose transactions stay open a moment (claims as first statements of longer ones):
  // producers take their path that does not wait.
  threads.emplace_back(guard([&] {
    session s(db.dsn());
    while (!stop && produced_done < producers) {
      begin_move(s, "q");
      s.query("SELECT pg_sleep(0.002)");
      s.query("COMMIT");
    }
  }));
  for (auto& t : threads) t.join();
  for (const auto& e : errors) FAIL(e);

  session s(db.dsn());
  CHECK(count_jobs(s, "done", "q") == producers * per_producer);
  CHECK(acked.size() == static_cast<std::size_t>(producers * per_producer));
  for (const auto& [id, n] : acked) {
    INFO("job " << id);
    CHECK(n == 1);
  }
}

}  // namespace sql_floor_test
