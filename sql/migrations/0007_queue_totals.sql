-- Counters per queue that only grow, so that rates (enqueued/s, done/s, failed/s: `pgqueue
-- top`, the dashboard, metrics) can be read as differences: failed attempts (nacks and expired
-- leases), and the jobs gc deleted, which neither the live counts nor the done counters show
-- any more (pgqueue.queue_summary adds them back). Sharded like done_counts: a statement of
-- its own counts in one of 32 slots (its pid mod 32), a longer transaction in a slot of its
-- own session (32 + pid, folded by gc), so failing workers do not queue on one row.
CREATE TABLE IF NOT EXISTS pgqueue.queue_totals (
  queue text NOT NULL,
  slot int NOT NULL,
  failed bigint NOT NULL DEFAULT 0,
  collected_done bigint NOT NULL DEFAULT 0,   -- done jobs gc deleted
  collected_other bigint NOT NULL DEFAULT 0,  -- dead and cancelled jobs gc deleted
  PRIMARY KEY (queue, slot)
);

-- Claims also return when each job became due (its run_after) and when it was claimed, both
-- by the server's clock, so a worker can measure how long a job waited for a worker without
-- comparing two machines' clocks. The old result type goes (grants come back on their own).
DROP FUNCTION IF EXISTS pgqueue.claim_batch(text, text, int, interval);

-- No parallel plans on the jobs table: every pgqueue query reads it through an index, and the
-- one the planner did parallelise (the depth view, with millions of retained jobs) was slower
-- for it: p50/p99 23.9/31.7 ms with two workers against 13.1/16.2 ms without (10M done jobs,
-- 1,000 queues, benchmarks/run --only observe). Ad-hoc scans of the table lose parallelism too.
ALTER TABLE pgqueue.jobs SET (parallel_workers = 0);
