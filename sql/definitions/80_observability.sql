-- ── observability ─────────────────────────────────────────────────────────────────────────

-- Jobs per queue and state, cheap with millions of completed jobs retained: live states are
-- counted through their partial indexes, done jobs come from the done counters (so `oldest`
-- and `newest_update` are NULL for them). `lag` is how long the oldest due ready job has
-- waited (the queue's lag); NULL for other states.
-- Replaced only when this run upgrades the schema (or the view is missing): replacing a view
-- locks it against its readers, so a run that changes nothing must not (a dashboard's open
-- transaction would hold it up, and queue every reader behind it). A change to the view
-- therefore comes with a migration.
DO $$
BEGIN
  IF current_setting('pgqueue.upgrading')::boolean OR to_regclass('pgqueue.depth') IS NULL THEN
    CREATE OR REPLACE VIEW pgqueue.depth AS
    SELECT s.queue, s.state, s.count, s.oldest, s.newest_update, s.lag
      FROM (
        -- One branch per state, each matching one partial index exactly (an IN list would leave
        -- the planner free to scan the whole table, retained jobs included).
        SELECT j.queue, 'ready' AS state, count(*) AS count, min(j.created_at) AS oldest,
               max(j.updated_at) AS newest_update,
               -- ('-infinity' has no lag: the difference would be an error)
               now() - min(j.run_after) FILTER (WHERE j.run_after <= now()
                                                  AND j.run_after > '-infinity') AS lag
          FROM pgqueue.jobs j
         WHERE j.state = 'ready'
         GROUP BY j.queue
        UNION ALL
        SELECT j.queue, 'claimed', count(*), min(j.created_at), max(j.updated_at), NULL::interval
          FROM pgqueue.jobs j
         WHERE j.state = 'claimed'
         GROUP BY j.queue
        UNION ALL
        SELECT j.queue, j.state, count(*), min(j.created_at), max(j.updated_at), NULL::interval
          FROM pgqueue.jobs j
         WHERE j.state IN ('dead', 'cancelled')
         GROUP BY j.queue, j.state
        UNION ALL
        SELECT j.queue, 'waiting', count(*), min(j.created_at), max(j.updated_at), NULL::interval
          FROM pgqueue.jobs j
         WHERE j.state = 'waiting'
         GROUP BY j.queue
        UNION ALL
        SELECT c.queue, 'done', sum(c.n)::bigint, NULL::timestamptz, NULL::timestamptz, NULL::interval
          FROM pgqueue.done_counts c
         GROUP BY c.queue
        HAVING sum(c.n) > 0
      ) s
     ORDER BY s.queue, s.state;
  END IF;
END
$$;

-- One row per queue known to the database (it has jobs, counters or a pause): the jobs in
-- each state (ready split into due now and scheduled for later), whether it is paused, how old
-- its oldest ready job due now is (since its enqueue), its lag (how long the oldest due ready job has waited), and totals
-- that only grow, for rates: jobs ever enqueued, done, and failed attempts (nacks and expired
-- leases) since version 7, and the jobs waiting for other jobs (last, added in version 9). What `pgqueue queues`, `top`, the dashboard and the metrics read.
-- Each state is read through its own partial index, done jobs from their counters, as `depth`.
CREATE OR REPLACE FUNCTION pgqueue.queue_summary()
RETURNS TABLE (
  queue text,
  paused boolean,
  ready bigint,
  scheduled bigint,
  claimed bigint,
  dead bigint,
  cancelled bigint,
  done bigint,
  oldest_ready_age_s float8,
  lag_s float8,
  enqueued_total bigint,
  done_total bigint,
  failed_total bigint,
  waiting bigint
)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
  WITH r AS (
    SELECT j.queue,
           count(*) FILTER (WHERE j.run_after <= now()) AS ready,
           count(*) FILTER (WHERE j.run_after > now()) AS scheduled,
           min(j.created_at) FILTER (WHERE j.run_after <= now()) AS oldest,  -- of the due ones
           -- ('-infinity' has no lag: the difference would be an error)
           min(j.run_after) FILTER (WHERE j.run_after <= now() AND j.run_after > '-infinity')
             AS oldest_due
      FROM pgqueue.jobs j
     WHERE j.state = 'ready'
     GROUP BY j.queue
  ), c AS (
    SELECT j.queue, count(*) AS claimed FROM pgqueue.jobs j WHERE j.state = 'claimed'
     GROUP BY j.queue
  ), s AS (
    SELECT j.queue, count(*) FILTER (WHERE j.state = 'dead') AS dead,
           count(*) FILTER (WHERE j.state = 'cancelled') AS cancelled
      FROM pgqueue.jobs j
     WHERE j.state IN ('dead', 'cancelled')
     GROUP BY j.queue
  ), w AS (
    SELECT j.queue, count(*) AS waiting FROM pgqueue.jobs j WHERE j.state = 'waiting'
     GROUP BY j.queue
  ), d AS (
    SELECT n.queue, sum(n.n)::bigint AS done FROM pgqueue.done_counts n GROUP BY n.queue
  ), t AS (
    SELECT x.queue, sum(x.failed)::bigint AS failed, sum(x.collected_done)::bigint AS gone_done,
           sum(x.collected_other)::bigint AS gone_other
      FROM pgqueue.queue_totals x
     GROUP BY x.queue
  ), names AS (
    SELECT r.queue FROM r UNION SELECT c.queue FROM c UNION SELECT s.queue FROM s
    UNION SELECT w.queue FROM w UNION SELECT d.queue FROM d UNION SELECT t.queue FROM t
    UNION SELECT p.queue FROM pgqueue.paused_queues p
  )
  SELECT n.queue,
         EXISTS (SELECT FROM pgqueue.paused_queues p WHERE p.queue = n.queue),
         coalesce(r.ready, 0), coalesce(r.scheduled, 0), coalesce(c.claimed, 0),
         coalesce(s.dead, 0), coalesce(s.cancelled, 0), greatest(coalesce(d.done, 0), 0),
         extract(epoch FROM now() - r.oldest)::float8,
         extract(epoch FROM now() - r.oldest_due)::float8,
         coalesce(r.ready, 0) + coalesce(r.scheduled, 0) + coalesce(c.claimed, 0)
           + coalesce(s.dead, 0) + coalesce(s.cancelled, 0) + coalesce(d.done, 0)
           + coalesce(t.gone_done, 0) + coalesce(t.gone_other, 0) + coalesce(w.waiting, 0),
         coalesce(d.done, 0) + coalesce(t.gone_done, 0),
         coalesce(t.failed, 0),
         coalesce(w.waiting, 0)
    FROM names n
    LEFT JOIN r ON r.queue = n.queue
    LEFT JOIN c ON c.queue = n.queue
    LEFT JOIN s ON s.queue = n.queue
    LEFT JOIN d ON d.queue = n.queue
    LEFT JOIN t ON t.queue = n.queue
    LEFT JOIN w ON w.queue = n.queue
   ORDER BY n.queue
$$;
