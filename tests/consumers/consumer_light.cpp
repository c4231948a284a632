// The Meson-through-pkg-config consumer's program. It reads the same pgqueue.pc as the plain
// compiler build, which compiles (and runs) the whole library header-only with those flags; this
// one proves what Meson makes of the file: the include path, the Asio defines, C++20, libpq and
// threads, in a program that uses pgqueue's headers and runs one statement on the server. The
// library's header-only compile is not repeated: it cost 19 of this test's 88 CPU-s.
//   consumer "<conninfo>"
#include <libpq-fe.h>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <cstdio>
#include <pgqueue/error.hpp>
#include <pgqueue/job.hpp>
#include <thread>

static_assert(__cplusplus >= 202002L, "pgqueue.pc must ask for C++20");
#if !defined(ASIO_STANDALONE) || !defined(ASIO_NO_DEPRECATED)
#error "pgqueue.pc must define ASIO_STANDALONE and ASIO_NO_DEPRECATED"
#endif

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: consumer <conninfo>\n");
    return 2;
  }
  bool ran = false;
  asio::io_context io;
  asio::post(io, [&] { ran = true; });
  std::thread runner([&] { io.run(); });  // links the threads pgqueue.pc names
  runner.join();
  PGconn* conn = PQconnectdb(argv[1]);
  PGresult* r = PQexec(conn, "SELECT 1");
  const bool ok = ran && PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok) std::fprintf(stderr, "consumer: %s", PQerrorMessage(conn));
  PQclear(r);
  PQfinish(conn);
  pgqueue::job job;
  std::printf("consumer: pgqueue's headers, Asio and libpq through Meson's pkg-config: %s\n",
              ok && job.id == 0 ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
