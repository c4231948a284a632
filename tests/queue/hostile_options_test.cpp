// Options outside their documented ranges are refused where they are handed over (a queue or a
// worker constructed, a connection opened) with invalid_argument and a message naming the
// option, before anything is sent; options at their limits work end to end (the sanitized build
// runs this under UBSan, which would report an overflow in the clock arithmetic they feed).
#include <climits>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <pgqueue/pgqueue.hpp>

#include "support/queue_fixture.hpp"
#include "support/server.hpp"
#include "support/session.hpp"

namespace queue_hostile_options_test {

using namespace pgq_test;
using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;
using pgqueue::queue_options;
using pgqueue::worker_options;
using pgqueue::pg::connect_options;

namespace {

struct refused_option {
  std::string what;
  std::string option;  // what the error message must name
  std::function<asio::awaitable<void>()> call;
};

// Each call must throw `code`, naming its option in a short message.
void check_refused(std::error_code code, const std::vector<refused_option>& cases) {
  for (const auto& c : cases) {
    INFO(c.what);
    auto e = run_async([&]() -> asio::awaitable<std::optional<pgqueue::error>> {
      try {
        co_await c.call();
      } catch (const pgqueue::error& e) {
        co_return e;
      }
      co_return std::nullopt;
    });
    REQUIRE(e);
    CHECK(e->code() == code);
    CHECK(e->sqlstate().empty());
    CHECK_THAT(e->what(), Catch::Contains(c.option));
    CHECK(std::string_view(e->what()).size() < 200);
  }
}

// Constructs a queue with `o` (no round trip: the database handle is empty).
refused_option queue_with(std::string what, std::string option, queue_options o) {
  return {std::move(what), std::move(option), [o]() -> asio::awaitable<void> {
            pgqueue::queue q(pgqueue::database{}, "q", o);
            co_return;
          }};
}

// Constructs a worker with `o` on a queue with default options (no round trip).
refused_option worker_with(std::string what, std::string option, worker_options o) {
  return {std::move(what), std::move(option), [o]() -> asio::awaitable<void> {
            pgqueue::worker w(
                pgqueue::queue(pgqueue::database{}, "q"),
                [](const pgqueue::job&) -> asio::awaitable<void> { co_return; }, o);
            co_return;
          }};
}

// Connects to the test server with `o`: without the check, most of these would connect.
refused_option connect_with(std::string what, std::string option, connect_options o) {
  return {std::move(what), std::move(option), [o]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            auto db = co_await pgqueue::connect(ex, server_dsn(), o);
          }};
}

const std::string nul_text = std::string("a\0b", 3);
const std::string bad_utf8 = "caf\xc3\x28";  // a broken two-byte sequence
const std::string id_256(256, 'w');
const std::string id_20k(20480, 'w');

// 85 three-byte characters: exactly queue_options::max_worker_id_bytes.
std::string euros_255() {
  std::string s;
  for (int i = 0; i < 85; ++i) s += "\xE2\x82\xAC";
  return s;
}

}  // namespace

TEST_CASE("queue options outside their ranges are refused when the queue is made", "[hostile]") {
  const auto lease = queue_options::max_lease;
  const auto poll = queue_options::max_poll_interval;
  const auto wake = queue_options::max_wake_interval;
  check_refused(
      pgqueue::errc::invalid_argument,
      {
          queue_with("lease of 1000 years", "queue_options.lease",
                     {.lease = std::chrono::hours(24 * 365 * 1000)}),
          queue_with("lease of INT64_MAX ms", "queue_options.lease", {.lease = ms::max()}),
          queue_with("lease just over 7 days", "queue_options.lease", {.lease = lease + 1ms}),
          queue_with("lease 0", "queue_options.lease", {.lease = 0ms}),
          queue_with("negative lease", "queue_options.lease", {.lease = -5s}),
          queue_with("lease 2 ms (its default heartbeat would be 0)", "queue_options.lease",
                     {.lease = 2ms}),
          queue_with("heartbeat equal to the lease", "queue_options.heartbeat_interval",
                     {.lease = 30s, .heartbeat_interval = 30s}),
          queue_with("heartbeat longer than the lease", "queue_options.heartbeat_interval",
                     {.lease = 200ms, .heartbeat_interval = 60s}),
          queue_with("negative heartbeat", "queue_options.heartbeat_interval",
                     {.heartbeat_interval = -1ms}),
          queue_with("poll interval 0", "queue_options.poll_interval", {.poll_interval = 0ms}),
          queue_with("negative poll interval", "queue_options.poll_interval",
                     {.poll_interval = -1ms}),
          queue_with("poll interval just over 24 h", "queue_options.poll_interval",
                     {.poll_interval = poll + 1ms}),
          queue_with("poll interval INT64_MAX ms", "queue_options.poll_interval",
                     {.poll_interval = ms::max()}),
          queue_with("negative wake interval", "queue_options.wake_interval",
                     {.wake_interval = -1us}),
          queue_with("wake interval just over a minute", "queue_options.wake_interval",
                     {.wake_interval = wake + 1us}),
          queue_with("wake interval INT64_MAX us", "queue_options.wake_interval",
                     {.wake_interval = std::chrono::microseconds::max()}),
          queue_with("256-byte worker id", "queue_options.worker_id", {.worker_id = id_256}),
          queue_with("20 kB worker id", "queue_options.worker_id", {.worker_id = id_20k}),
          queue_with("worker id with a NUL byte", "queue_options.worker_id",
                     {.worker_id = nul_text}),
          queue_with("worker id with invalid UTF-8", "queue_options.worker_id",
                     {.worker_id = bad_utf8}),
      });
}

TEST_CASE("worker options outside their ranges are refused when the worker is made", "[hostile]") {
  const auto longest = worker_options::max_interval;
  check_refused(
      pgqueue::errc::invalid_argument,
      {
          worker_with("concurrency 0", "worker_options.concurrency", {.concurrency = 0}),
          worker_with("concurrency INT_MIN", "worker_options.concurrency",
                      {.concurrency = INT_MIN}),
          worker_with("concurrency 10001", "worker_options.concurrency", {.concurrency = 10001}),
          worker_with("concurrency INT_MAX", "worker_options.concurrency",
                      {.concurrency = INT_MAX}),
          worker_with("claim batch -1", "worker_options.claim_batch", {.claim_batch = -1}),
          worker_with("claim batch INT_MIN", "worker_options.claim_batch",
                      {.claim_batch = INT_MIN}),
          worker_with("connections 0", "worker_options.connections", {.connections = 0}),
          worker_with("more connections than concurrency", "worker_options.connections",
                      {.concurrency = 4, .connections = 5}),
          worker_with("negative janitor interval", "worker_options.janitor_interval",
                      {.janitor_interval = -1ms}),
          worker_with("janitor interval just over 24 h", "worker_options.janitor_interval",
                      {.janitor_interval = longest + 1ms}),
          worker_with("janitor interval INT64_MAX ms", "worker_options.janitor_interval",
                      {.janitor_interval = ms::max()}),
          worker_with("negative stop timeout", "worker_options.stop_timeout",
                      {.stop_timeout = -1ms}),
          worker_with("stop timeout just over 24 h", "worker_options.stop_timeout",
                      {.stop_timeout = longest + 1ms}),
          worker_with("stop timeout INT64_MAX ms", "worker_options.stop_timeout",
                      {.stop_timeout = ms::max()}),
      });
}

TEST_CASE("connect options outside their ranges are refused before connecting", "[hostile]") {
  const auto longest = connect_options::max_duration;
  check_refused(
      pgqueue::pg::errc::invalid_argument,
      {
          connect_with("connect timeout 0", "connect_options.connect_timeout",
                       {.connect_timeout = 0ms}),
          connect_with("negative connect timeout", "connect_options.connect_timeout",
                       {.connect_timeout = -1ms}),
          connect_with("connect timeout INT64_MAX ms", "connect_options.connect_timeout",
                       {.connect_timeout = ms::max()}),
          connect_with("negative initial backoff", "connect_options.reconnect_initial_backoff",
                       {.reconnect_initial_backoff = -1ms}),
          connect_with("initial backoff above the maximum",
                       "connect_options.reconnect_initial_backoff",
                       {.reconnect_initial_backoff = 5s, .reconnect_max_backoff = 1s}),
          connect_with("negative maximum backoff", "connect_options.reconnect_max_backoff",
                       {.reconnect_initial_backoff = 0ms, .reconnect_max_backoff = -1ms}),
          connect_with("maximum backoff just over the limit",
                       "connect_options.reconnect_max_backoff",
                       {.reconnect_max_backoff = longest + 1ms}),
          connect_with("negative reconnect wait", "connect_options.reconnect_wait",
                       {.reconnect_wait = -1ms}),
          connect_with("reconnect wait INT64_MAX ms", "connect_options.reconnect_wait",
                       {.reconnect_wait = ms::max()}),
          connect_with("negative statement timeout", "connect_options.statement_timeout",
                       {.statement_timeout = -1ms}),
          connect_with("statement timeout beyond the server's int",
                       "connect_options.statement_timeout", {.statement_timeout = longest + 1ms}),
      });
}

TEST_CASE("options at their limits work end to end", "[hostile]") {
  queue_fixture f;
  session admin(f.db.dsn());
  const std::string worker_id = euros_255();
  const std::string key(pgqueue::enqueue_options::max_idempotency_key_bytes, 'k');
  const auto longest = connect_options::max_duration;
  const connect_options limits{.connect_timeout = longest,
                               .reconnect_initial_backoff = longest,
                               .reconnect_max_backoff = longest,
                               .reconnect_wait = longest,
                               .statement_timeout = longest};
  std::int64_t id = 0;
  pgqueue::worker_stats stats;
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto db = co_await pgqueue::connect(ex, f.db.dsn(), limits);
    auto shown = co_await db.query("SELECT current_setting('statement_timeout')");
    CHECK(shown.get<std::string>(0, 0) == "2147483647ms");
    pgqueue::queue q{db,
                     "q",
                     {.worker_id = worker_id,
                      .lease = queue_options::max_lease,
                      .heartbeat_interval = queue_options::max_lease - 1ms,
                      .poll_interval = queue_options::max_poll_interval,
                      .wake_interval = queue_options::max_wake_interval}};
    id = co_await q.enqueue("{}", {.idempotency_key = key});
    pgqueue::worker* self = nullptr;
    pgqueue::worker w(
        q,
        [&](const pgqueue::job& j) -> asio::awaitable<void> {
          CHECK(j.id == id);
          // The whole 7-day lease, granted to the whole 255-byte id.
          CHECK(admin.scalar("SELECT (lease_until - claimed_at = interval '7 days')::text || "
                             "claimed_by FROM pgqueue.jobs WHERE id = $1",
                             {std::to_string(id)}) == "true" + worker_id);
          self->stop();
          co_return;
        },
        {.concurrency = worker_options::max_concurrency,
         .claim_batch = INT_MAX,
         .janitor_interval = worker_options::max_interval,
         .stop_timeout = worker_options::max_interval});
    self = &w;
    co_await w.run();
    stats = w.stats();
  });
  CHECK(stats.claimed == 1);
  CHECK(stats.acked == 1);
  const auto job = read_job(admin, id);
  CHECK(job.state == "done");
  CHECK(job.idempotency_key == key);
  CHECK(job.claimed_by == worker_id);
}

}  // namespace queue_hostile_options_test
