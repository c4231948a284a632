-- ── dependencies (jobs that wait for other jobs) ──────────────────────────────────────────
-- A job enqueued with depends_on (enqueue, enqueue_batch) waits in state 'waiting' until every
-- job it depends on (its parents) is done, then becomes ready. pgqueue.job_dependencies holds
-- one row (an edge) per parent still to finish. The rules:
--   * enqueue locks the parents FOR SHARE (in id order) and refuses an id that is not a job
--     (23503, nothing stored). Parents already done are dropped; with none left the job is
--     ready at once, as without depends_on. A parent already dead makes the job dead at once
--     ("dependency N is dead"), a cancelled one cancelled ("dependency N was cancelled"). With
--     an idempotency key already in the queue the existing job is returned and nothing added.
--     Parents may be in any queue. A job can only wait for jobs that exist before it: no cycles.
--   * ack/ack_batch of a parent deletes its edges (in a statement after the update, so it sees
--     the edges of an enqueue that held the parent's row); a child with no parent left to
--     finish becomes ready, due at the later of its run_after and now, admitted under the claim
--     floors, its queue woken.
--   * a parent that ends dead (nack, janitor) makes its waiting children dead, transitively,
--     with "dependency N is dead" (N: the child's own parent); a cancelled one (pgqueue.cancel,
--     which also cancels waiting jobs) cancels them ("dependency N was cancelled"). They keep
--     their edges.
--   * retry_dead: a retried job that still has edges waits again for its parents that are not
--     done; when one of them is dead, cancelled or gone it is dead again with that reason. Its
--     parent retried in the same call is ready again, so the child waits for it.
--   * the janitor's safety net (dependencies_sweep) walks waiting jobs in slices: a job none of
--     whose parents is left to finish (done or gone) becomes ready, one with a dead or
--     cancelled parent ends with it. It covers acks and deaths that ran in an older snapshot
--     (REPEATABLE READ) and did not see the edges.
--   * gc deletes the edges of the jobs it deletes.
-- Every path that locks waiting jobs locks all of them in one statement in id order, after
-- the other jobs it locks, so two of them take turns instead of deadlocking; the sweep skips
-- rows others hold.

-- The state a new job with parents p_depends_on starts in: 'ready' when all of them are done
-- (or there are none), else 'waiting'. Locks the parents FOR SHARE until the transaction ends
-- (a concurrent ack of one waits, then sees the edge), waiting ones last; refuses an unknown
-- id.
CREATE OR REPLACE FUNCTION pgqueue.dependencies_check(p_depends_on bigint[])
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_found int;
  v_open int;
  v_missing bigint;
BEGIN
  PERFORM pgqueue.require_valid(coalesce(array_ndims(p_depends_on), 1) = 1,
                                'depends_on must be a one-dimensional array');
  PERFORM pgqueue.require_valid(array_position(p_depends_on, NULL) IS NULL,
                                'depends_on must not contain NULL');
  -- Waiting parents last, as an ack locks its jobs before the waiting jobs it releases: an
  -- enqueue that locked a waiting parent first could wait for a parent that an ack holds while
  -- that ack waits for the waiting one (a deadlock).
  SELECT count(*), count(*) FILTER (WHERE l.state <> 'done') INTO v_found, v_open
    FROM (SELECT j.id, j.state FROM pgqueue.jobs j
           WHERE j.id = ANY (p_depends_on)
           ORDER BY j.state = 'waiting', j.id
             FOR SHARE) l;
  IF v_found < (SELECT count(DISTINCT u) FROM unnest(p_depends_on) u) THEN
    SELECT min(u) INTO v_missing FROM unnest(p_depends_on) u
     WHERE NOT EXISTS (SELECT FROM pgqueue.jobs j WHERE j.id = u);
    RAISE EXCEPTION 'pgqueue: dependency % does not exist', v_missing
      USING ERRCODE = 'foreign_key_violation',
            DETAIL = 'A job can only depend on jobs that exist (gc deletes finished jobs).';
  END IF;
  RETURN CASE WHEN v_open > 0 THEN 'waiting' ELSE 'ready' END;
END
$$;

-- Stores the edges of new waiting jobs p_jobs (ids that are not jobs are skipped: enqueue_batch
-- passes the ids it drew, some of which an idempotency key turned away) to the parents
-- p_depends_on that are not done (locked by dependencies_check), and ends the jobs at once
-- when a parent is dead or cancelled.
CREATE OR REPLACE FUNCTION pgqueue.dependencies_add(p_jobs bigint[], p_depends_on bigint[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_dead bigint;
  v_cancelled bigint;
  v_error text;
BEGIN
  INSERT INTO pgqueue.job_dependencies (job_id, depends_on)
  SELECT c.id, p.id
    FROM pgqueue.jobs c, pgqueue.jobs p
   WHERE c.id = ANY (p_jobs) AND c.state = 'waiting'
     AND p.id = ANY (p_depends_on) AND p.state <> 'done';
  SELECT min(p.id) FILTER (WHERE p.state = 'dead'), min(p.id) FILTER (WHERE p.state = 'cancelled')
    INTO v_dead, v_cancelled
    FROM pgqueue.jobs p
   WHERE p.id = ANY (p_depends_on) AND p.state IN ('dead', 'cancelled');
  IF v_dead IS NOT NULL THEN
    v_error := format('dependency %s is dead', v_dead);
    UPDATE pgqueue.jobs j
       SET state = 'dead', finished_at = now(), updated_at = now(), last_error = v_error,
           errors = pgqueue.error_history(j.errors, j.attempts, NULL, v_error)
     WHERE j.id = ANY (p_jobs) AND j.state = 'waiting';
  ELSIF v_cancelled IS NOT NULL THEN
    UPDATE pgqueue.jobs j
       SET state = 'cancelled', finished_at = now(), updated_at = now(),
           last_error = format('dependency %s was cancelled', v_cancelled)
     WHERE j.id = ANY (p_jobs) AND j.state = 'waiting';
  END IF;
END
$$;

-- Makes ready the waiting jobs among p_children none of whose parents is left to finish (each
-- is done, or gone), deletes their edges, admits them under the claim floors and wakes their
-- queues. Returns how many. Locks the waiting ones first, in id order: two acks of two parents
-- of one child take turns, and the second sees the first's deleted edge (this statement's
-- snapshot is taken after the lock). With p_skip_locked, jobs another transaction holds are
-- left for it.
CREATE OR REPLACE FUNCTION pgqueue.dependencies_release(
  p_children bigint[], p_skip_locked boolean DEFAULT false)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_locked bigint[];
  v_first record;
  v_count int := 0;
BEGIN
  IF p_skip_locked THEN
    v_locked := ARRAY(SELECT j.id FROM pgqueue.jobs j
                       WHERE j.id = ANY (p_children) AND (j.state = 'waiting') IS TRUE
                       ORDER BY j.id
                         FOR UPDATE SKIP LOCKED);
  ELSE
    v_locked := ARRAY(SELECT j.id FROM pgqueue.jobs j
                       WHERE j.id = ANY (p_children) AND (j.state = 'waiting') IS TRUE
                       ORDER BY j.id
                         FOR UPDATE);
  END IF;
  IF cardinality(v_locked) = 0 THEN
    RETURN 0;
  END IF;
  FOR v_first IN
    WITH released AS (
      UPDATE pgqueue.jobs j
         SET state = 'ready', run_after = greatest(j.run_after, now()), updated_at = now()
       WHERE j.id = ANY (ARRAY(
               -- Per job (LATERAL ... LIMIT 1): as an anti-join, a plan made while the edges
               -- looked few hashed all of them on every release.
               SELECT c.id FROM unnest(v_locked) c(id)
                 LEFT JOIN LATERAL (SELECT 1 AS open FROM pgqueue.job_dependencies d
                                     WHERE d.job_id = c.id
                                       AND (SELECT p.state FROM pgqueue.jobs p
                                             WHERE p.id = d.depends_on) <> 'done'
                                     LIMIT 1) o ON true
                WHERE o.open IS NULL))
         AND (j.state = 'waiting') IS TRUE
      RETURNING j.queue, j.priority, j.run_after, j.id
    ), unlinked AS (
      DELETE FROM pgqueue.job_dependencies d
       WHERE d.job_id = ANY (ARRAY(SELECT r.id FROM released r))
    )
    SELECT DISTINCT ON (r.queue, r.priority) r.queue, r.priority, r.run_after, r.id,
           count(*) OVER () AS n
      FROM released r
     ORDER BY r.queue, r.priority, r.run_after, r.id
  LOOP
    v_count := v_first.n;
    PERFORM pgqueue.floor_admit(v_first.queue, v_first.priority, v_first.run_after, v_first.id);
    PERFORM pgqueue.notify_queue(v_first.queue);  -- folds: one per queue
  END LOOP;
  RETURN v_count;
END
$$;

-- The parents p_parents are done (ack, ack_batch: called in a statement after the update, and
-- only when an edge points at them): deletes their edges and releases the children with no
-- parent left to finish.
CREATE OR REPLACE FUNCTION pgqueue.dependencies_done(p_parents bigint[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_children bigint[];
BEGIN
  WITH gone AS (
    DELETE FROM pgqueue.job_dependencies d WHERE d.depends_on = ANY (p_parents)
    RETURNING d.job_id
  )
  SELECT array_agg(DISTINCT g.job_id) INTO v_children FROM gone g;
  IF v_children IS NOT NULL THEN
    PERFORM pgqueue.dependencies_release(v_children);
  END IF;
END
$$;

-- The parents p_parents ended p_state ('dead' or 'cancelled'): their waiting children end the
-- same way, and theirs in turn, each with "dependency N is dead" (or "was cancelled") naming
-- its own parent; they keep their edges. Returns how many jobs it ended. The waiting jobs
-- below the parents are read once and locked in id order first.
CREATE OR REPLACE FUNCTION pgqueue.dependencies_failed(
  p_parents bigint[], p_state text, p_skip_locked boolean DEFAULT false)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_below bigint[];
  v_locked bigint[];
  v_frontier bigint[] := p_parents;
  v_count int := 0;
BEGIN
  PERFORM pgqueue.require_valid(p_state IN ('dead', 'cancelled'), 'state must be dead or cancelled');
  IF NOT EXISTS (SELECT FROM pgqueue.job_dependencies d WHERE d.depends_on = ANY (p_parents)) THEN
    RETURN 0;
  END IF;
  v_below := ARRAY(
    -- Each step probes the edges of each job found (LATERAL) and each child's state (a
    -- subquery per row): as joins, plans made while the tables looked small read every edge
    -- and every waiting job.
    WITH RECURSIVE below(id) AS (
      SELECT d.job_id FROM pgqueue.job_dependencies d
       WHERE d.depends_on = ANY (p_parents)
         AND (SELECT j.state FROM pgqueue.jobs j WHERE j.id = d.job_id) = 'waiting'
      UNION
      SELECT x.job_id FROM below b
       CROSS JOIN LATERAL (
         SELECT d.job_id FROM pgqueue.job_dependencies d
          WHERE d.depends_on = b.id
            AND (SELECT j.state FROM pgqueue.jobs j WHERE j.id = d.job_id) = 'waiting'
         OFFSET 0) x
    )
    SELECT b.id FROM below b);
  IF p_skip_locked THEN
    v_locked := ARRAY(SELECT j.id FROM pgqueue.jobs j
                       WHERE j.id = ANY (v_below) AND (j.state = 'waiting') IS TRUE
                       ORDER BY j.id
                         FOR UPDATE SKIP LOCKED);
  ELSE
    PERFORM FROM pgqueue.jobs j
      WHERE j.id = ANY (v_below) AND (j.state = 'waiting') IS TRUE
      ORDER BY j.id
        FOR UPDATE;
  END IF;
  LOOP
    WITH ended AS (
      -- The jobs through the primary key (= ANY (ARRAY(...)), as the janitor does), each
      -- naming its first parent among those that just ended.
      UPDATE pgqueue.jobs j
         SET state = p_state, finished_at = now(), updated_at = now(),
             last_error = format(CASE WHEN p_state = 'dead' THEN 'dependency %s is dead'
                                      ELSE 'dependency %s was cancelled' END,
                                 (SELECT min(d.depends_on) FROM pgqueue.job_dependencies d
                                   WHERE d.job_id = j.id AND d.depends_on = ANY (v_frontier))),
             errors = CASE WHEN p_state = 'dead'
                           THEN pgqueue.error_history(j.errors, j.attempts, NULL, format(
                                  'dependency %s is dead',
                                  (SELECT min(d.depends_on) FROM pgqueue.job_dependencies d
                                    WHERE d.job_id = j.id AND d.depends_on = ANY (v_frontier))))
                           ELSE j.errors END
       WHERE j.id = ANY (ARRAY(SELECT d.job_id FROM pgqueue.job_dependencies d
                                WHERE d.depends_on = ANY (v_frontier)
                                  AND (NOT p_skip_locked OR d.job_id = ANY (v_locked))))
         AND (j.state = 'waiting') IS TRUE
      RETURNING j.id
    )
    SELECT array_agg(x.id) INTO v_frontier FROM ended x;
    EXIT WHEN v_frontier IS NULL;
    v_count := v_count + cardinality(v_frontier);
  END LOOP;
  RETURN v_count;
END
$$;

-- Jobs p_ids that retry_dead just made ready: those with edges left wait again for their
-- parents that are not done (locked FOR SHARE, as enqueue does), or are dead again when one
-- of those is dead, cancelled or gone.
CREATE OR REPLACE FUNCTION pgqueue.dependencies_retried(p_ids bigint[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_ids bigint[];
BEGIN
  v_ids := ARRAY(SELECT DISTINCT d.job_id FROM pgqueue.job_dependencies d
                  WHERE d.job_id = ANY (p_ids));
  IF cardinality(v_ids) = 0 THEN
    RETURN;
  END IF;
  PERFORM FROM pgqueue.jobs p
    WHERE p.id = ANY (ARRAY(SELECT d.depends_on FROM pgqueue.job_dependencies d
                             WHERE d.job_id = ANY (v_ids)))
    ORDER BY p.state = 'waiting', p.id  -- as dependencies_check
      FOR SHARE;
  -- (Each edge's parent by a subquery per row, not a join: see dependencies_failed.)
  DELETE FROM pgqueue.job_dependencies d
   WHERE d.job_id = ANY (v_ids)
     AND (SELECT p.state FROM pgqueue.jobs p WHERE p.id = d.depends_on) = 'done';
  WITH edge AS (
    SELECT d.job_id, d.depends_on,
           (SELECT p.state FROM pgqueue.jobs p WHERE p.id = d.depends_on) AS state
      FROM pgqueue.job_dependencies d
     WHERE d.job_id = ANY (v_ids)
  ), bad AS (
    SELECT e.job_id,
           (array_agg(format(CASE WHEN e.state IS NULL THEN 'dependency %s no longer exists'
                                  WHEN e.state = 'dead' THEN 'dependency %s is dead'
                                  ELSE 'dependency %s was cancelled' END, e.depends_on)
                      ORDER BY e.depends_on))[1] AS error
      FROM edge e
     WHERE e.state IS NULL OR e.state IN ('dead', 'cancelled')
     GROUP BY e.job_id
  )
  UPDATE pgqueue.jobs j
     SET state = 'dead', finished_at = now(), updated_at = now(), last_error = b.error,
         errors = pgqueue.error_history(j.errors, j.attempts, NULL, b.error)
    FROM bad b
   WHERE j.id = ANY (ARRAY(SELECT x.job_id FROM bad x)) AND j.id = b.job_id
     AND (j.state = 'ready') IS TRUE;
  UPDATE pgqueue.jobs j
     SET state = 'waiting', updated_at = now()
   WHERE j.id = ANY (v_ids) AND (j.state = 'ready') IS TRUE
     AND EXISTS (SELECT FROM pgqueue.job_dependencies d WHERE d.job_id = j.id);
END
$$;

-- The janitor's safety net: looks at the next p_limit waiting jobs (in id order, from where
-- this session's last look stopped) and releases those none of whose parents is left to
-- finish, and ends those with a dead or cancelled parent (with their waiting descendants).
-- Rows other transactions hold are skipped. Returns how many jobs it changed. One probe of an
-- empty index when nothing waits; about 3 ms for a slice of 250 waiting jobs (one pass over
-- their edges and parents). Only in READ COMMITTED (an older snapshot could take a retried
-- parent for dead).
CREATE OR REPLACE FUNCTION pgqueue.dependencies_sweep(p_limit int DEFAULT 250)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_from bigint;
  v_ids bigint[];
  v_job record;
  v_dead bigint[] := '{}';
  v_cancelled bigint[] := '{}';
  v_free bigint[] := '{}';
  v_count int := 0;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RETURN 0;
  END IF;
  v_from := coalesce(nullif(current_setting('pgqueue.waiting_swept_id', true), '')::bigint, 0);
  v_ids := ARRAY(SELECT w.id FROM pgqueue.jobs w
                  WHERE w.state = 'waiting' AND w.id > v_from
                  ORDER BY w.id
                  LIMIT p_limit);
  -- A session setting: the next look goes on from here, and starts over after the last slice.
  PERFORM set_config('pgqueue.waiting_swept_id',
                     CASE WHEN cardinality(v_ids) < p_limit THEN '0'
                          ELSE v_ids[cardinality(v_ids)]::text END, false);
  IF cardinality(v_ids) = 0 THEN
    RETURN 0;
  END IF;
  -- Per job (LATERAL): as a join, a plan made while the edges looked few hashed all of them.
  FOR v_job IN
    SELECT w.id, x.open, x.dead, x.cancelled
      FROM unnest(v_ids) w(id),
           LATERAL (SELECT count(*) FILTER (WHERE e.state <> 'done') AS open,  -- left to finish
                           min(e.depends_on) FILTER (WHERE e.state = 'dead') AS dead,
                           min(e.depends_on) FILTER (WHERE e.state = 'cancelled') AS cancelled
                      FROM (SELECT d.depends_on,
                                   (SELECT p.state FROM pgqueue.jobs p WHERE p.id = d.depends_on)
                                     AS state
                              FROM pgqueue.job_dependencies d
                             WHERE d.job_id = w.id) e) x
  LOOP
    IF v_job.dead IS NOT NULL THEN  -- dead first: a job with both kinds of parents ends dead
      v_dead := v_dead || v_job.dead;
    ELSIF v_job.cancelled IS NOT NULL THEN
      v_cancelled := v_cancelled || v_job.cancelled;
    ELSIF v_job.open = 0 THEN
      v_free := v_free || v_job.id;
    END IF;
  END LOOP;
  IF cardinality(v_dead) > 0 THEN
    v_count := v_count + pgqueue.dependencies_failed(v_dead, 'dead', true);
  END IF;
  IF cardinality(v_cancelled) > 0 THEN
    v_count := v_count + pgqueue.dependencies_failed(v_cancelled, 'cancelled', true);
  END IF;
  IF cardinality(v_free) > 0 THEN
    v_count := v_count + pgqueue.dependencies_release(v_free, true);
  END IF;
  RETURN v_count;
END
$$;

-- What the janitor does for dependencies: the jobs it ended dead (p_dead) end their waiting
-- children, then the safety net runs.
CREATE OR REPLACE FUNCTION pgqueue.dependencies_janitor(p_dead bigint[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF cardinality(p_dead) > 0 THEN
    PERFORM pgqueue.dependencies_failed(p_dead, 'dead');
  END IF;
  PERFORM pgqueue.dependencies_sweep();
END
$$;

-- The jobs p_job_id waits for (its parents not yet done), with their states; for `pgqueue job`
-- and anyone inspecting a waiting job. Parents that no longer exist have a NULL state.
CREATE OR REPLACE FUNCTION pgqueue.job_dependencies_of(p_job_id bigint)
RETURNS TABLE (depends_on bigint, state text, queue text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
  SELECT d.depends_on, p.state, p.queue
    FROM pgqueue.job_dependencies d
    LEFT JOIN pgqueue.jobs p ON p.id = d.depends_on
   WHERE d.job_id = p_job_id
   ORDER BY d.depends_on
$$;
