// Fan-out and fan-in through the C++ API with a real worker: 1,000 jobs after one, one job
// after the 1,000; a job that dies takes the job waiting for it along.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"

namespace queue_dependencies_test {

using namespace pgq_test;
using namespace std::chrono_literals;

namespace {

constexpr int fan = 1000;

// The ids as a SQL array literal.
std::string array_of(const std::vector<std::int64_t>& ids) {
  std::string out = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "}";
}

// One parent, `fan` children after it (one enqueue_batch), and one job after all the children,
// all in `q`. Children whose index is in `failing` are payload {"fail": true}; every job has
// `max_attempts`.
struct graph {
  std::int64_t parent = 0;
  std::vector<std::int64_t> children;
  std::int64_t fan_in = 0;
};

asio::awaitable<graph> build(pgqueue::queue& q, const std::vector<int>& failing, int max_attempts) {
  graph g;
  const pgqueue::enqueue_options parent_opts{.max_attempts = max_attempts};
  g.parent = co_await q.enqueue(R"({"role":"parent"})", parent_opts);
  std::vector<std::string> payloads;
  for (int i = 0; i < fan; ++i) {
    const bool fails = std::find(failing.begin(), failing.end(), i) != failing.end();
    payloads.push_back(fails ? R"({"role":"child","fail":true})" : R"({"role":"child"})");
  }
  const std::vector<std::int64_t> parent_id{g.parent};
  pgqueue::enqueue_options child_opts{.max_attempts = max_attempts};
  child_opts.depends_on = parent_id;
  g.children = co_await q.enqueue_batch(std::move(payloads), child_opts);
  pgqueue::enqueue_options fan_in_opts{.max_attempts = max_attempts};
  fan_in_opts.depends_on = g.children;
  g.fan_in = co_await q.enqueue(R"({"role":"fan-in"})", fan_in_opts);
  co_return g;
}

}  // namespace

TEST_CASE("fan-out of 1,000 and fan-in: the fan-in job runs once, after the last child",
          "[dependencies]") {
  queue_fixture f;
  session admin(f.db.dsn()), probe(f.db.dsn());
  graph g;
  std::map<std::int64_t, int> runs;
  std::vector<std::int64_t> order;  // handler starts
  std::int64_t children_done_at_fan_in = -1;
  bool parent_done_at_every_child = true;
  run_async(
      [&]() -> asio::awaitable<void> {
        pgqueue::queue q{co_await f.connect(), "flow"};
        const std::vector<int> none;
        g = co_await build(q, none, 5);
        CHECK(count_jobs(admin, "waiting") == fan + 1);
        const auto status = co_await pgqueue::read_queue_status(q.db());
        REQUIRE(status.size() == 1);
        CHECK(status[0].waiting == fan + 1);
        CHECK(status[0].ready == 1);
        pgqueue::worker* self = nullptr;
        pgqueue::worker w(
            q,
            [&](const pgqueue::job& j) -> asio::awaitable<void> {
              order.push_back(j.id);
              ++runs[j.id];
              if (j.id == g.fan_in) {
                // Every child's ack is committed before the fan-in job is handed out.
                children_done_at_fan_in = probe.integer(
                    "SELECT count(*) FROM pgqueue.jobs WHERE id = ANY($1) AND state = 'done'",
                    {array_of(g.children)});
                self->stop();
              } else if (j.id != g.parent) {
                if (probe.scalar("SELECT state FROM pgqueue.jobs WHERE id = $1",
                                 {std::to_string(g.parent)}) != "done") {
                  parent_done_at_every_child = false;
                }
              }
              co_await pause(0ms);
            },
            {.concurrency = 16});
        self = &w;
        co_await w.run();
      },
      180s);
  REQUIRE(order.size() == fan + 2);
  CHECK(order.front() == g.parent);
  CHECK(order.back() == g.fan_in);
  CHECK(std::all_of(runs.begin(), runs.end(), [](auto& r) { return r.second == 1; }));
  CHECK(parent_done_at_every_child);
  CHECK(children_done_at_fan_in == fan);
  CHECK(count_jobs(admin, "done") == fan + 2);
  // By the server's clock too: claimed no earlier than the last child's ack.
  CHECK(*admin.scalar("SELECT (SELECT claimed_at FROM pgqueue.jobs WHERE id = $1) >= "
                      "(SELECT max(finished_at) FROM pgqueue.jobs WHERE id = ANY($2))",
                      {std::to_string(g.fan_in), array_of(g.children)}) == "t");
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.job_dependencies") == 0);
}

TEST_CASE("a child that dies makes the fan-in job dead; the other children run", "[dependencies]") {
  queue_fixture f;
  session admin(f.db.dsn());
  graph g;
  std::map<std::int64_t, int> runs;
  run_async(
      [&]() -> asio::awaitable<void> {
        pgqueue::queue q{co_await f.connect(), "flow"};
        const std::vector<int> failing{fan / 2};
        g = co_await build(q, failing, 1);
        pgqueue::worker w(q,
                          [&](const pgqueue::job& j) -> asio::awaitable<void> {
                            ++runs[j.id];
                            co_await pause(0ms);
                            if (j.payload.find("fail") != std::string::npos)
                              throw std::runtime_error("no");
                          },
                          {.concurrency = 16});
        auto ex = co_await asio::this_coro::executor;
        asio::co_spawn(
            ex,
            [&]() -> asio::awaitable<void> {
              // Every job finished: the parent and the children done or dead, and the fan-in
              // job ended with them.
              co_await eventually(
                  [&] {
                    return admin.integer(
                               "SELECT count(*) FROM pgqueue.jobs "
                               "WHERE state IN ('done', 'dead')") == fan + 2;
                  },
                  120s);
              w.stop();
            },
            asio::detached);
        co_await w.run();
      },
      180s);
  const auto dead_child = g.children[fan / 2];
  CHECK(read_job(admin, dead_child).state == "dead");
  const auto fan_in = read_job(admin, g.fan_in);
  CHECK(fan_in.state == "dead");
  CHECK(fan_in.last_error == "dependency " + std::to_string(dead_child) + " is dead");
  CHECK(fan_in.attempts == 0);
  CHECK(runs.count(g.fan_in) == 0);
  CHECK(count_jobs(admin, "done") == fan);  // the parent and the 999 other children
  CHECK(runs.size() == fan + 1);
}

TEST_CASE("depends_on inside a transaction, copied at the call, and an unknown id refused",
          "[dependencies]") {
  queue_fixture f;
  session admin(f.db.dsn());
  std::int64_t parent = 0, child = 0;
  std::vector<std::int64_t> batch;
  std::string refused;
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto pool = co_await pgqueue::pool::open(ex, f.db.dsn());
    auto q = co_await pgqueue::queue::open(pool, "q");
    parent = co_await q.enqueue("{}");
    co_await pgqueue::in_transaction(pool, [&](pgqueue::transaction& tx) -> asio::awaitable<void> {
      std::optional<asio::awaitable<std::int64_t>> pending;
      {
        std::vector<std::int64_t> ids{parent};
        pgqueue::enqueue_options opts;
        opts.depends_on = ids;
        pending.emplace(q.enqueue(tx, "{}", opts));
      }  // the ids are gone before the enqueue runs: it copied them
      child = co_await std::move(*pending);
      const std::vector<std::int64_t> ids{parent, child};
      pgqueue::enqueue_options opts;
      opts.depends_on = ids;
      std::vector<std::string> payloads{"{}", "{}"};
      batch = co_await q.enqueue_batch(tx, std::move(payloads), opts);
    });
    const std::vector<std::int64_t> unknown{parent, 987654};
    pgqueue::enqueue_options bad;
    bad.depends_on = unknown;
    try {
      co_await q.enqueue("{}", bad);
    } catch (const pgqueue::error& e) {
      refused = e.sqlstate() + " " + e.message();
    }
  });
  CHECK(read_job(admin, child).state == "waiting");
  REQUIRE(batch.size() == 2);
  CHECK(read_job(admin, batch[1]).state == "waiting");
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.job_dependencies") == 5);
  CHECK(refused == "23503 pgqueue: dependency 987654 does not exist");
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs") == 4);
}

}  // namespace queue_dependencies_test
