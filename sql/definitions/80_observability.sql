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
        SELECT c.queue, 'done', sum(c.n)::bigint, NULL::timestamptz, NULL::timestamptz, NULL::interval
          FROM pgqueue.done_counts c
         GROUP BY c.queue
        HAVING sum(c.n) > 0
      ) s
     ORDER BY s.queue, s.state;
  END IF;
END
$$;
