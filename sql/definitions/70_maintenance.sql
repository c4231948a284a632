-- ── maintenance ───────────────────────────────────────────────────────────────────────────

-- Takes back jobs whose lease expired more than p_grace ago: ready again (woken at once), or
-- 'dead' when the expired attempt was the last one, so a job that kills its worker cannot run
-- without bound. Ready jobs that already used all attempts (left by the seed's janitor) are
-- ended 'dead' too. Returns how many jobs it changed. Safe to run often and from many places.
-- What the janitor records when it takes back a job whose lease ran out.
CREATE OR REPLACE FUNCTION pgqueue.lease_expired_error(
  p_attempts int, p_max_attempts int, p_holder text, p_lease_until timestamptz)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN pgqueue.bounded_error(format(
    'lease expired on attempt %s of %s (worker %s, lease until %s)%s',
    p_attempts, p_max_attempts, p_holder, p_lease_until,
    CASE WHEN p_attempts >= p_max_attempts THEN ': no attempts left' ELSE '' END));
END
$$;

CREATE OR REPLACE FUNCTION pgqueue.janitor_reset_stale_claims(
  p_grace interval DEFAULT '0 seconds'::interval
)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_count int := 0;
  v_exhausted int;
  v_reset record;
  v_queues text[] := '{}';
  v_dead bigint[] := '{}';
BEGIN
  PERFORM pgqueue.require(p_grace, 'grace');
  -- A negative grace would take back leases that are still valid.
  PERFORM pgqueue.require_valid(p_grace >= interval '0', 'grace must not be negative');
  FOR v_reset IN
    -- Both statements pick their rows in a subquery run once (= ANY (ARRAY(...))) and update
    -- them through the primary key: as a join, stale statistics (a table that grew since its
    -- last analyze) could make the planner read the picking scan once per row of the table.
    WITH stale AS (
      SELECT j.id FROM pgqueue.jobs j
       WHERE j.state = 'claimed' AND j.lease_until + p_grace < now()
         FOR UPDATE SKIP LOCKED
    ), reset AS (
      UPDATE pgqueue.jobs j
         SET state = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'ready' END,
             finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
             run_after = now(),
             last_error = pgqueue.lease_expired_error(j.attempts, j.max_attempts, j.claimed_by,
                                                      j.lease_until),
             errors = pgqueue.error_history(j.errors, j.attempts, j.claimed_by,
                                            pgqueue.lease_expired_error(j.attempts, j.max_attempts,
                                                                        j.claimed_by, j.lease_until)),
             claimed_by = NULL, claimed_at = NULL, lease_until = NULL, updated_at = now()
       WHERE j.id = ANY (ARRAY(SELECT t.id FROM stale t))
      RETURNING j.queue, j.state, j.priority, j.run_after, j.id
    )
    SELECT r.* FROM reset r
  LOOP
    v_count := v_count + 1;
    v_queues := v_queues || v_reset.queue;
    IF v_reset.state = 'ready' THEN
      PERFORM pgqueue.floor_admit(v_reset.queue, v_reset.priority, v_reset.run_after, v_reset.id);
      PERFORM pgqueue.notify_queue(v_reset.queue);  -- folds: one per queue
    ELSE
      v_dead := v_dead || v_reset.id;
    END IF;
  END LOOP;
  IF v_count > 0 THEN
    PERFORM pgqueue.count_failed(v_queues);  -- an expired lease is a failed attempt
    PERFORM pgqueue.slots_freed(v_queues);   -- each job taken back freed a place
  END IF;

  WITH exhausted AS (
    UPDATE pgqueue.jobs j
       SET state = 'dead', finished_at = now(), updated_at = now(),
           last_error = pgqueue.bounded_error(format(
             'no attempts left (%s of %s used) when found ready', j.attempts, j.max_attempts))
     WHERE j.id = ANY (ARRAY(SELECT r.id FROM pgqueue.jobs r
                              WHERE r.state = 'ready' AND r.attempts >= r.max_attempts
                              LIMIT 10000  -- bounded; also keeps the plan on the small index
                                FOR UPDATE SKIP LOCKED))
    RETURNING j.id
  )
  SELECT count(*), v_dead || coalesce(array_agg(e.id), '{}') INTO v_exhausted, v_dead
    FROM exhausted e;
  PERFORM pgqueue.dependencies_janitor(v_dead);  -- their waiting jobs; the safety net
  RETURN v_count + v_exhausted;
END
$$;

-- Cancels a job that has not started (ready or waiting): it ends 'cancelled', and so do the
-- jobs waiting for it (definitions/77_dependencies.sql). False when the job is not ready or
-- waiting (running, finished or missing).
CREATE OR REPLACE FUNCTION pgqueue.cancel(p_job_id bigint)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
BEGIN
  PERFORM pgqueue.require(p_job_id, 'job_id');
  UPDATE pgqueue.jobs j
     SET state = 'cancelled', finished_at = now(), updated_at = now()
   WHERE j.id = p_job_id AND (j.state IN ('ready', 'waiting')) IS TRUE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pgqueue.dependencies_failed(ARRAY[p_job_id], 'cancelled');
  RETURN true;
END
$$;

-- Puts dead jobs of a queue back to ready with a fresh set of attempts: all of them, or only
-- p_job_ids. Returns how many; wakes the queue's listeners. A retried job that waits for other
-- jobs waits again (definitions/77_dependencies.sql).
CREATE OR REPLACE FUNCTION pgqueue.retry_dead(p_queue text, p_job_ids bigint[] DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_count int := 0;
  v_first record;
  v_ids bigint[];
BEGIN
  PERFORM pgqueue.check_queue_name(p_queue);
  -- One retry at a time, database-wide: a retry locks its jobs, then the jobs they wait for
  -- (which may be another retry's, in another queue: two such calls deadlocked every time).
  -- Retrying is an operator's act, rare and short.
  PERFORM pg_advisory_xact_lock(8100266002545501545);
  FOR v_first IN
    WITH retried AS (
      UPDATE pgqueue.jobs j
         SET state = 'ready', attempts = 0, run_after = now(), finished_at = NULL,
             updated_at = now()
       WHERE j.queue = p_queue AND j.state = 'dead'
         AND (p_job_ids IS NULL OR j.id = ANY (p_job_ids))
      RETURNING j.priority, j.run_after, j.id
    )
    SELECT DISTINCT ON (r.priority) r.priority, r.run_after, r.id, count(*) OVER () AS n,
           array_agg(r.id) OVER () AS ids
      FROM retried r
     ORDER BY r.priority, r.run_after, r.id
  LOOP
    v_count := v_first.n;
    v_ids := v_first.ids;
    PERFORM pgqueue.floor_admit(p_queue, v_first.priority, v_first.run_after, v_first.id);
  END LOOP;
  IF v_count > 0 THEN
    PERFORM pgqueue.dependencies_retried(v_ids);
    PERFORM pgqueue.notify_queue(p_queue);
  END IF;
  RETURN v_count;
END
$$;

-- Deletes finished jobs past their retention, at most p_batch_size of each kind per call so no
-- call holds a long transaction; call it until it returns zeros (or CALL pgqueue.gc_all()).
-- Cancelled jobs share the done retention.
CREATE OR REPLACE FUNCTION pgqueue.gc(
  p_retain_done interval DEFAULT '7 days'::interval,
  p_retain_dead interval DEFAULT '30 days'::interval,
  p_batch_size int DEFAULT 10000
)
RETURNS TABLE (done_deleted int, dead_deleted int)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_queue text;
  v_locked bigint;
BEGIN
  PERFORM pgqueue.require(p_retain_done, 'retain_done');
  PERFORM pgqueue.require(p_retain_dead, 'retain_dead');
  PERFORM pgqueue.require(p_batch_size, 'batch_size');
  PERFORM pgqueue.require_valid(p_batch_size >= 1, 'batch_size must be at least 1');
  -- A negative retention would delete jobs that finished a moment ago, or in the future.
  PERFORM pgqueue.require_valid(p_retain_done >= interval '0' AND p_retain_dead >= interval '0',
                                'retain_done and retain_dead must not be negative');
  WITH gone AS (
    DELETE FROM pgqueue.jobs j
     WHERE j.id IN (SELECT f.id FROM pgqueue.jobs f
                     WHERE f.state IN ('done', 'cancelled') AND f.finished_at < now() - p_retain_done
                       -- Kept while a job still waits for it (an edge an ack in an older
                       -- snapshot missed): the janitor's safety net must see how it ended.
                       AND NOT EXISTS (SELECT FROM pgqueue.job_dependencies d
                                        WHERE d.depends_on = f.id)
                     LIMIT p_batch_size
                       FOR UPDATE SKIP LOCKED)
    RETURNING j.queue, j.state, j.id
  ), unlinked AS (  -- their edges (cancelled jobs keep theirs)
    DELETE FROM pgqueue.job_dependencies d WHERE d.job_id = ANY (ARRAY(SELECT g.id FROM gone g))
  ), counted AS (
    -- Deleted done jobs leave the counters (as a negative delta in slot 0).
    INSERT INTO pgqueue.done_counts (queue, slot, n)
    SELECT g.queue, 0, -count(*) FROM gone g WHERE g.state = 'done' GROUP BY g.queue
    ON CONFLICT (queue, slot) DO UPDATE SET n = pgqueue.done_counts.n + EXCLUDED.n
  ), totalled AS (
    -- ... and join the totals, which only grow (queue_summary adds them back).
    INSERT INTO pgqueue.queue_totals AS t (queue, slot, collected_done, collected_other)
    SELECT g.queue, 0, count(*) FILTER (WHERE g.state = 'done'),
           count(*) FILTER (WHERE g.state <> 'done')
      FROM gone g GROUP BY g.queue
    ON CONFLICT (queue, slot) DO UPDATE
      SET collected_done = t.collected_done + EXCLUDED.collected_done,
          collected_other = t.collected_other + EXCLUDED.collected_other
  )
  SELECT count(*)::int INTO done_deleted FROM gone;

  WITH gone AS (
    DELETE FROM pgqueue.jobs j
     WHERE j.id IN (SELECT f.id FROM pgqueue.jobs f
                     WHERE f.state = 'dead' AND f.finished_at < now() - p_retain_dead
                       AND NOT EXISTS (SELECT FROM pgqueue.job_dependencies d
                                        WHERE d.depends_on = f.id)  -- (as above)
                     LIMIT p_batch_size
                       FOR UPDATE SKIP LOCKED)
    RETURNING j.queue, j.id
  ), unlinked AS (  -- their edges (dead jobs keep theirs)
    DELETE FROM pgqueue.job_dependencies d WHERE d.job_id = ANY (ARRAY(SELECT g.id FROM gone g))
  ), totalled AS (
    INSERT INTO pgqueue.queue_totals AS t (queue, slot, collected_other)
    SELECT g.queue, 0, count(*) FROM gone g GROUP BY g.queue
    ON CONFLICT (queue, slot) DO UPDATE SET collected_other = t.collected_other + EXCLUDED.collected_other
  )
  SELECT count(*)::int INTO dead_deleted FROM gone;

  -- Fold the sessions' own counter slots (acks inside longer transactions) into slot 0; one
  -- a transaction holds right now is skipped, not waited for.
  WITH moved AS (
    DELETE FROM pgqueue.done_counts c
     WHERE (c.queue, c.slot) IN (SELECT d.queue, d.slot FROM pgqueue.done_counts d
                                  WHERE d.slot >= 32
                                  LIMIT p_batch_size
                                    FOR UPDATE SKIP LOCKED)
    RETURNING c.queue, c.n
  )
  INSERT INTO pgqueue.done_counts AS c (queue, slot, n)
  SELECT m.queue, 0, sum(m.n) FROM moved m GROUP BY m.queue
  ON CONFLICT (queue, slot) DO UPDATE SET n = c.n + EXCLUDED.n;

  WITH moved AS (  -- the same for the totals' session slots (failures inside transactions)
    DELETE FROM pgqueue.queue_totals c
     WHERE (c.queue, c.slot) IN (SELECT d.queue, d.slot FROM pgqueue.queue_totals d
                                  WHERE d.slot >= 32
                                  LIMIT p_batch_size
                                    FOR UPDATE SKIP LOCKED)
    RETURNING c.queue, c.failed, c.collected_done, c.collected_other
  )
  INSERT INTO pgqueue.queue_totals AS t (queue, slot, failed, collected_done, collected_other)
  SELECT m.queue, 0, sum(m.failed), sum(m.collected_done), sum(m.collected_other)
    FROM moved m GROUP BY m.queue
  ON CONFLICT (queue, slot) DO UPDATE
    SET failed = t.failed + EXCLUDED.failed,
        collected_done = t.collected_done + EXCLUDED.collected_done,
        collected_other = t.collected_other + EXCLUDED.collected_other;

  -- Fold the counter shards of queues with nothing left so the table stays small. The shards
  -- are locked and summed again first: an ack committing meanwhile changes a shard, and
  -- deleting it on the strength of the older sum would drop that count. A shard an acker holds
  -- right now is skipped, not waited for (no deadlock with ack_batch): folding waits for the
  -- next gc.
  FOR v_queue IN
    SELECT d.queue FROM pgqueue.done_counts d GROUP BY d.queue HAVING sum(d.n) = 0
  LOOP
    SELECT count(*) INTO v_locked FROM (
      SELECT 1 FROM pgqueue.done_counts c WHERE c.queue = v_queue FOR UPDATE SKIP LOCKED) l;
    IF v_locked = (SELECT count(*) FROM pgqueue.done_counts c WHERE c.queue = v_queue)
       AND (SELECT sum(c.n) FROM pgqueue.done_counts c WHERE c.queue = v_queue) = 0 THEN
      DELETE FROM pgqueue.done_counts c WHERE c.queue = v_queue;
    END IF;
  END LOOP;
  RETURN NEXT;
END
$$;

-- Runs gc in batches until nothing is left to delete, committing after each batch. A procedure
-- (CALL it outside a transaction block); it cannot pin search_path because that forbids COMMIT,
-- so it only calls the pinned pgqueue.gc.
CREATE OR REPLACE PROCEDURE pgqueue.gc_all(
  p_retain_done interval DEFAULT '7 days'::interval,
  p_retain_dead interval DEFAULT '30 days'::interval,
  p_batch_size int DEFAULT 10000
)
LANGUAGE plpgsql
AS $$
DECLARE
  v_done int;
  v_dead int;
BEGIN
  LOOP
    SELECT g.done_deleted, g.dead_deleted INTO v_done, v_dead
      FROM pgqueue.gc(p_retain_done, p_retain_dead, p_batch_size) g;
    COMMIT;
    EXIT WHEN v_done = 0 AND v_dead = 0;
  END LOOP;
END
$$;
