// Owning smart pointers for libpq objects, so every early return frees them.
#pragma once

#include <libpq-fe.h>

#include <memory>

namespace pgqueue::pg::detail {

struct pgconn_deleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
struct pgresult_deleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
struct pqfree_deleter {
  void operator()(void* p) const noexcept { PQfreemem(p); }
};

using conn_ptr = std::unique_ptr<PGconn, pgconn_deleter>;
using result_ptr = std::unique_ptr<PGresult, pgresult_deleter>;
using notify_ptr = std::unique_ptr<PGnotify, pqfree_deleter>;

}  // namespace pgqueue::pg::detail
