// The run log of multi-process fault tests: a table in the test's database where every handler
// run is recorded before the job's work starts, so a run cut short by SIGKILL still counts.
// Shared by the worker program (writes) and the test (creates and reads).
#pragma once

namespace pgq_fault {

inline constexpr const char* create_run_log_sql =
    "CREATE TABLE fault_runs (job_id bigint NOT NULL, worker text NOT NULL, "
    "attempt int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())";

// $1 job id, $2 worker id, $3 the lease's attempt.
inline constexpr const char* record_run_sql =
    "INSERT INTO fault_runs (job_id, worker, attempt) VALUES ($1, $2, $3)";

}  // namespace pgq_fault
