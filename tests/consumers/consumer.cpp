// An outside project's program, built against an installed pgqueue: enqueues one job, claims
// it and acks it. Exits 0 when the job ended done.
//   consumer "<conninfo>"
#include <cstdio>
#include <exception>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <pgqueue/pgqueue.hpp>

asio::awaitable<bool> one_job(std::string conninfo) {
  auto db = co_await pgqueue::connect(co_await asio::this_coro::executor, conninfo);
  co_await pgqueue::migrate(db);
  pgqueue::queue q{db, "consumer"};
  const auto id = co_await q.enqueue(R"({"hello": "world"})");
  auto lease = co_await q.claim();
  const bool same = lease.job().id == id;
  co_await lease.ack();
  auto r = co_await db.query("SELECT state FROM pgqueue.jobs WHERE id = $1", {id});
  co_return same && r.get<std::string>(0, 0) == "done";
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: consumer <conninfo>\n");
    return 2;
  }
  asio::io_context io;
  bool ok = false;
  std::exception_ptr failure;
  std::string conninfo = argv[1];
  asio::co_spawn(io, one_job(std::move(conninfo)), [&](std::exception_ptr e, bool done) {
    failure = e;
    ok = done;
  });
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "consumer: %s\n", e.what());
    }
    return 1;
  }
  std::printf("consumer: one job enqueued, claimed and acked: %s\n", ok ? "done" : "NOT done");
  return ok ? 0 : 1;
}
