#include "support/sql_api.hpp"

namespace pgq_test {

std::int64_t enqueue(session& s, const std::string& queue, const std::string& payload,
                     const value& key, int priority) {
  return s.integer("SELECT pgqueue.enqueue($1, $2::jsonb, $3, $4)",
                   {queue, payload, key, std::to_string(priority)});
}

std::vector<claimed> claim(session& s, const std::string& queue, const std::string& worker,
                           int limit, const std::string& lease) {
  std::vector<claimed> out;
  for (auto& r : s.query("SELECT id, queue, payload::text, priority, attempts, lease_token "
                         "FROM pgqueue.claim_batch($1, $2, $3, $4::interval)",
                         {queue, worker, std::to_string(limit), lease})) {
    out.push_back(
        {std::stoll(*r[0]), *r[1], *r[2], std::stoi(*r[3]), std::stoi(*r[4]), std::stoll(*r[5])});
  }
  return out;
}

std::int64_t take_back(session& s, std::int64_t id) {
  s.query("BEGIN");
  try {
    s.query("UPDATE pgqueue.jobs SET lease_until = now() - interval '1 s' WHERE id = $1",
            {std::to_string(id)});
    const auto taken = s.integer("SELECT pgqueue.janitor_reset_stale_claims()");
    s.query("COMMIT");
    return taken;
  } catch (...) {
    s.query("ROLLBACK");
    throw;
  }
}

std::string jobs_digest(session& s) {
  return *s.scalar(
      "SELECT count(*) || ':' || coalesce(md5(string_agg(j::text, '|' ORDER BY j.id)), '') "
      "FROM pgqueue.jobs j");
}

}  // namespace pgq_test
