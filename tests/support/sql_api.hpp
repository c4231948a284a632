// Helpers that call the pgqueue SQL functions through a blocking session, shared by the SQL
// suites so each test states only what it checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/session.hpp"

namespace pgq_test {

// One row of claim_batch / claim_next.
struct claimed {
  std::int64_t id;
  std::string queue;
  std::string payload;
  int priority;
  int attempts;
  std::int64_t lease_token;  // what fences heartbeat/ack/nack/release on this claim
};

std::int64_t enqueue(session& s, const std::string& queue, const std::string& payload = "{}",
                     const value& key = std::nullopt, int priority = 0);
std::vector<claimed> claim(session& s, const std::string& queue, const std::string& worker,
                           int limit = 1, const std::string& lease = "5 minutes");
// Takes job `id` back behind its holder's back: expires its lease and runs the janitor in one
// transaction (so a heartbeat cannot extend the lease in between). Returns how many jobs the
// janitor took back.
std::int64_t take_back(session& s, std::int64_t id);
// A digest of every job row: equal digests mean nothing in pgqueue.jobs changed.
std::string jobs_digest(session& s);

}  // namespace pgq_test
