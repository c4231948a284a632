// Out-of-line definitions of pgqueue/pg/detail/request.hpp: included at its end (header-only), or
// compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/pg/detail/request.hpp"

namespace pgqueue::pg::detail {

PGQUEUE_DECL void request::add(result_ptr res) {
  if (preparing_ && PQresultStatus(res.get()) == PGRES_COMMAND_OK) {
    preparing_ = false;  // the Parse's answer, not the statement's
    return;
  }
  switch (PQresultStatus(res.get())) {
    case PGRES_TUPLES_OK:
    case PGRES_COMMAND_OK:
    case PGRES_EMPTY_QUERY:
    case PGRES_SINGLE_TUPLE:
      if (!have_first_) {
        first = result(res.release());
        have_first_ = true;
      }
      break;
    case PGRES_PIPELINE_ABORTED:
      note_failure(make_error(errc::protocol_error, "statement skipped: pipeline aborted"));
      break;
    default: {
      // 26000: the session no longer has the prepared statement (DEALLOCATE by the user).
      const char* state = PQresultErrorField(res.get(), PG_DIAG_SQLSTATE);
      if (state && std::string_view(state) == "26000") statement_missing_ = true;
      note_failure(std::make_exception_ptr(server_error_of(res.get())));
      break;
    }
  }
}

}  // namespace pgqueue::pg::detail
