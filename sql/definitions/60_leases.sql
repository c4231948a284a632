-- ── lease operations (fenced: only the current holder of the current claim may act) ───────
-- They find their jobs by id, and write `(j.state = 'claimed') IS TRUE` rather than
-- `j.state = 'claimed'` so that the planner cannot answer them from the partial index of
-- claimed jobs instead of the primary key: its statistics usually say that index is nearly
-- empty, and it then reads every claimed job, and every dead entry claimed jobs left behind a
-- long transaction (an ack of 100 jobs took 30 ms after a minute of that at 5,000 jobs/s).

-- Extends the lease of a job the caller holds. False when the lease is lost (the job is no
-- longer claimed by this worker under this claim). p_lease_token (from the claim) fences
-- against a later claim of the same job by the same worker id; NULL skips that check (the
-- seed's callers). NULL when another transaction holds the job's row (e.g. an ack inside the
-- application's transaction, not committed yet): try again later. It never waits for that
-- transaction, which would hold up everything else on the caller's session meanwhile.
CREATE OR REPLACE FUNCTION pgqueue.heartbeat(
  p_job_id bigint,
  p_worker_id text,
  p_extend_by interval DEFAULT '5 minutes'::interval,
  p_lease_token bigint DEFAULT NULL
)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
BEGIN
  IF p_job_id IS NULL OR p_worker_id IS NULL OR p_extend_by IS NULL
     OR p_extend_by <= interval '0' THEN
    PERFORM pgqueue.require(p_job_id, 'job_id');
    PERFORM pgqueue.require(p_worker_id, 'worker_id');
    PERFORM pgqueue.require(p_extend_by, 'extend_by');
    PERFORM pgqueue.require_valid(p_extend_by > interval '0', 'extend_by must be positive');
  END IF;
  UPDATE pgqueue.jobs j
     SET lease_until = now() + p_extend_by
   WHERE j.id = (SELECT k.id FROM pgqueue.jobs k WHERE k.id = p_job_id
                    FOR NO KEY UPDATE SKIP LOCKED)
     AND (j.state = 'claimed') IS TRUE
     AND j.claimed_by = p_worker_id
     AND (p_lease_token IS NULL OR j.lease_token = p_lease_token);
  IF FOUND THEN
    RETURN true;
  END IF;
  -- Not extended: lost, or skipped because another transaction holds the row (then still ours
  -- as far as committed data says).
  IF EXISTS (SELECT FROM pgqueue.jobs j
              WHERE j.id = p_job_id
                AND (j.state = 'claimed') IS TRUE
                AND j.claimed_by = p_worker_id
                AND (p_lease_token IS NULL OR j.lease_token = p_lease_token)) THEN
    RETURN NULL;
  END IF;
  RETURN false;
END
$$;

-- The counter slot this statement adds to (done_counts, queue_totals). A transaction that
-- counts as a statement of its own shares one of 32 slots with other sessions; one that runs
-- longer (an ack inside the application's transaction, more than 5 ms after it began) counts
-- in a slot of its own session (32 + its pid), since it holds the slot's row until it ends and
-- would hold up every other counter of that slot meanwhile. gc folds those. Plain SQL without
-- SET clauses, every name qualified: the planner inlines it into the caller's statement.
CREATE OR REPLACE FUNCTION pgqueue.counter_slot()
RETURNS int
LANGUAGE sql STABLE
AS $$
  SELECT CASE WHEN (pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-)
                    pg_catalog.transaction_timestamp())
                   OPERATOR(pg_catalog.<) interval '5 milliseconds'
              THEN pg_catalog.pg_backend_pid() OPERATOR(pg_catalog.%) 32
              ELSE 32 OPERATOR(pg_catalog.+) pg_catalog.pg_backend_pid() END
$$;

-- Adds failed attempts (nacks, expired leases) to the per-queue totals (per counter_slot; in
-- the session's own slot while a claim runs maintenance, pgqueue.maintaining: such a claim may
-- be the first statement of a longer transaction, which counter_slot cannot tell).
CREATE OR REPLACE FUNCTION pgqueue.count_failed(p_queues text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  INSERT INTO pgqueue.queue_totals AS t (queue, slot, failed)
  SELECT u.q,
         CASE WHEN current_setting('pgqueue.maintaining', true) = 'on'
              THEN 32 + pg_backend_pid() ELSE pgqueue.counter_slot() END,
         count(*)
    FROM unnest(p_queues) AS u(q) GROUP BY u.q
  ON CONFLICT (queue, slot) DO UPDATE SET failed = t.failed + EXCLUDED.failed;
END
$$;

-- Marks a job the caller holds as done. False when the lease is lost.
CREATE OR REPLACE FUNCTION pgqueue.ack(
  p_job_id bigint,
  p_worker_id text,
  p_lease_token bigint DEFAULT NULL
)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_queue text;
  v_limited boolean;
  v_waited_on boolean;
BEGIN
  IF p_job_id IS NULL OR p_worker_id IS NULL THEN
    PERFORM pgqueue.require(p_job_id, 'job_id');
    PERFORM pgqueue.require(p_worker_id, 'worker_id');
  END IF;
  UPDATE pgqueue.jobs j
     SET state = 'done', finished_at = now(), updated_at = now(), lease_until = NULL
   WHERE j.id = p_job_id
     AND (j.state = 'claimed') IS TRUE
     AND j.claimed_by = p_worker_id
     AND (p_lease_token IS NULL OR j.lease_token = p_lease_token)
  RETURNING j.queue,
            -- A concurrency-limited queue? (Asked here: a statement of its own cost an ack 2%.)
            EXISTS (SELECT FROM pgqueue.queue_limits l
                     WHERE l.queue = j.queue AND l.max_claimed IS NOT NULL)
    INTO v_queue, v_limited;
  IF v_queue IS NULL THEN
    RETURN false;
  END IF;
  -- Counted done (here: calling a function for it cost an ack 15%), and whether jobs wait for
  -- it, in one statement (a statement of its own cost an ack 2%). After the update: it sees
  -- the edges of an enqueue that held the row until it committed. One index probe when there
  -- are none.
  WITH counted AS (
    INSERT INTO pgqueue.done_counts AS c (queue, slot, n)
    VALUES (v_queue, pgqueue.counter_slot(), 1)
    ON CONFLICT (queue, slot) DO UPDATE SET n = c.n + EXCLUDED.n
  )
  SELECT EXISTS (SELECT FROM pgqueue.job_dependencies d WHERE d.depends_on = p_job_id)
    INTO v_waited_on;
  IF v_limited THEN
    -- A place freed: wake the queue's claimers (as pgqueue.slots_freed).
    PERFORM pg_notify(pgqueue.channel(v_queue), v_queue || E'\nfreed');
  END IF;
  IF v_waited_on THEN
    PERFORM pgqueue.dependencies_done(ARRAY[p_job_id]);
  END IF;
  RETURN true;
END
$$;

-- Marks many held jobs done in one statement; returns the ids that were acknowledged (a
-- missing id lost its lease). p_lease_tokens pairs with p_job_ids (NULL skips the check).
CREATE OR REPLACE FUNCTION pgqueue.ack_batch(
  p_job_ids bigint[],
  p_worker_id text,
  p_lease_tokens bigint[] DEFAULT NULL
)
RETURNS bigint[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  v_ids bigint[];
  v_queues text[];
  v_limited boolean;
  v_any_waiting boolean;
BEGIN
  IF p_job_ids IS NULL OR p_worker_id IS NULL
     OR (p_lease_tokens IS NOT NULL AND cardinality(p_lease_tokens) <> cardinality(p_job_ids)) THEN
    PERFORM pgqueue.require(p_job_ids, 'job_ids');
    PERFORM pgqueue.require(p_worker_id, 'worker_id');
    PERFORM pgqueue.require_valid(
      p_lease_tokens IS NULL OR cardinality(p_lease_tokens) = cardinality(p_job_ids),
      format('%s lease tokens for %s job ids', cardinality(p_lease_tokens), cardinality(p_job_ids)));
  END IF;
  -- One generic plan for every call (force_generic_plan above), whatever the statistics: the
  -- jobs by `id = ANY`, and their tokens checked in hashed subplans (under OR, so the planner
  -- cannot turn them into joins). As a join with unnest(ids, tokens) the server planned the
  -- statement on every call (160 us per one-job ack_batch instead of 62); a generic plan of
  -- the join nested the unnest inside (0.9 ms for 64 jobs instead of 0.35) or, made while the
  -- table looked empty, read every job through the primary key.
  WITH acked AS (
    UPDATE pgqueue.jobs j
       SET state = 'done', finished_at = now(), updated_at = now(), lease_until = NULL
     WHERE j.id = ANY (p_job_ids)
       AND (j.state = 'claimed') IS TRUE
       AND j.claimed_by = p_worker_id
       AND (p_lease_tokens IS NULL
            OR (j.id, j.lease_token) IN (SELECT t.id, t.token
                                           FROM unnest(p_job_ids, p_lease_tokens) AS t(id, token))
            OR j.id IN (SELECT t.id FROM unnest(p_job_ids, p_lease_tokens) AS t(id, token)
                         WHERE t.token IS NULL))
    RETURNING j.id, j.queue
  )
  SELECT coalesce(array_agg(a.id ORDER BY a.id), '{}'), array_agg(a.queue),
         -- Any concurrency-limited queue at all? Asked here, not in a statement of its own, and
         -- as the first such queue in key order: an index probe (2 us), where EXISTS scanned
         -- the table (6 us; no index serves `max_claimed IS NOT NULL`).
         (SELECT l.queue FROM pgqueue.queue_limits l WHERE l.max_claimed IS NOT NULL
           ORDER BY l.queue LIMIT 1) IS NOT NULL
    INTO v_ids, v_queues, v_limited
    FROM acked a;
  IF cardinality(v_ids) > 0 THEN
    -- Counted done (here: calling a function for it cost a batch of one 7%), and
    -- whether any job waits at all, in one statement.
    WITH counted AS (
      INSERT INTO pgqueue.done_counts AS c (queue, slot, n)
      SELECT u.q, pgqueue.counter_slot(), count(*)
        FROM unnest(v_queues) AS u(q) GROUP BY u.q
      ON CONFLICT (queue, slot) DO UPDATE SET n = c.n + EXCLUDED.n
    )
    SELECT EXISTS (SELECT FROM pgqueue.job_dependencies d) INTO v_any_waiting;
    IF v_limited THEN
      -- pgqueue.slots_freed, written out as in ack.
      PERFORM pg_notify(pgqueue.channel(l.queue), l.queue || E'\nfreed')
         FROM pgqueue.queue_limits l WHERE l.queue = ANY (v_queues) AND l.max_claimed IS NOT NULL;
    END IF;
    -- Jobs waiting for them (as in ack). The probe of every id costs 36 us for 100 ids; when no
    -- job waits at all, the first test (4 us) spares it.
    -- Nested, not `v_any_waiting AND EXISTS (...)`: that is a query PL/pgSQL runs through the
    -- executor on every call even when the first operand is false.
    IF v_any_waiting THEN
      IF EXISTS (SELECT FROM pgqueue.job_dependencies d WHERE d.depends_on = ANY (v_ids)) THEN
        PERFORM pgqueue.dependencies_done(v_ids);
      END IF;
    END IF;
  END IF;
  RETURN v_ids;
END
$$;

-- The retry delay after attempt `p_attempts` fails: exponential from the queue's retry_base,
-- capped at retry_max, with +-25% jitter so failed jobs do not retry in lockstep.
CREATE OR REPLACE FUNCTION pgqueue.retry_delay(p_queue text, p_attempts int)
RETURNS interval
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN (
    SELECT least(s.retry_max,
                 s.retry_base * power(2, least(greatest(p_attempts, 1) - 1, 40))
                   * (0.75 + random() * 0.5))
      FROM pgqueue.queue_settings s
     WHERE s.queue IN (p_queue, '')
     ORDER BY s.queue DESC
     LIMIT 1);
END
$$;

-- Sets a queue's retry back-off (the queue '' sets the default for queues without a row).
CREATE OR REPLACE FUNCTION pgqueue.set_retry_backoff(p_queue text, p_base interval, p_max interval)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF p_queue IS DISTINCT FROM '' THEN  -- '' is the default's row; NULL is refused
    PERFORM pgqueue.check_queue_name(p_queue);
  END IF;
  PERFORM pgqueue.require(p_base, 'base');
  PERFORM pgqueue.require(p_max, 'max');
  PERFORM pgqueue.require_valid(p_base >= interval '0' AND p_max >= p_base,
                                'back-off needs 0 <= base <= max');
  INSERT INTO pgqueue.queue_settings VALUES (p_queue, p_base, p_max)
  ON CONFLICT (queue) DO UPDATE SET retry_base = EXCLUDED.retry_base, retry_max = EXCLUDED.retry_max;
END
$$;

-- The last error kept on a job: bounded so repeated failures cannot grow a row without end.
CREATE OR REPLACE FUNCTION pgqueue.bounded_error(p_error text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN left(p_error, 2000); END $$;

-- A job's error history (pgqueue.jobs.errors) with one more failure: attempt p_attempt, held by
-- p_holder, failed with p_error (already bounded) now. Keeps the last 10 entries.
CREATE OR REPLACE FUNCTION pgqueue.error_history(
  p_errors jsonb, p_attempt int, p_holder text, p_error text)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_errors jsonb := coalesce(p_errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
    'attempt', p_attempt, 'at', now(), 'holder', p_holder, 'error', p_error));
BEGIN
  WHILE jsonb_array_length(v_errors) > 10 LOOP
    v_errors := v_errors - 0;
  END LOOP;
  RETURN v_errors;
END
$$;

-- Gives back a job the caller holds after a failure: requeued after a back-off (or after
-- p_requeue_after when given), or 'dead' when that was its last attempt. Returns 'requeued',
-- 'dead' or 'lost' (the caller no longer holds the lease). Listeners are woken when it is
-- requeued (for a later retry too, so an idle claimer learns when it falls due).
CREATE OR REPLACE FUNCTION pgqueue.nack(
  p_job_id bigint,
  p_worker_id text,
  p_error text DEFAULT NULL,
  p_requeue_after interval DEFAULT NULL,
  p_lease_token bigint DEFAULT NULL
)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_job pgqueue.jobs%ROWTYPE;
  v_delay interval;
BEGIN
  IF p_job_id IS NULL OR p_worker_id IS NULL OR p_requeue_after < interval '0' THEN
    PERFORM pgqueue.require(p_job_id, 'job_id');
    PERFORM pgqueue.require(p_worker_id, 'worker_id');
    PERFORM pgqueue.require_valid(p_requeue_after IS NULL OR p_requeue_after >= interval '0',
                                  'requeue_after must not be negative');
  END IF;
  SELECT * INTO v_job FROM pgqueue.jobs j
   WHERE j.id = p_job_id
     AND (j.state = 'claimed') IS TRUE
     AND j.claimed_by = p_worker_id
     AND (p_lease_token IS NULL OR j.lease_token = p_lease_token)
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN 'lost';
  END IF;
  PERFORM pgqueue.count_failed(ARRAY[v_job.queue]);
  IF v_job.attempts >= v_job.max_attempts THEN
    UPDATE pgqueue.jobs j
       SET state = 'dead', last_error = pgqueue.bounded_error(p_error), finished_at = now(),
           updated_at = now(), lease_until = NULL,
           errors = pgqueue.error_history(j.errors, j.attempts, j.claimed_by,
                                          pgqueue.bounded_error(p_error))
     WHERE j.id = p_job_id;
    PERFORM pgqueue.slots_freed(ARRAY[v_job.queue]);
    PERFORM pgqueue.dependencies_failed(ARRAY[p_job_id], 'dead');  -- jobs waiting for it
    RETURN 'dead';
  END IF;
  v_delay := coalesce(p_requeue_after, pgqueue.retry_delay(v_job.queue, v_job.attempts));
  UPDATE pgqueue.jobs j
     SET state = 'ready', run_after = now() + v_delay, last_error = pgqueue.bounded_error(p_error),
         errors = pgqueue.error_history(j.errors, j.attempts, j.claimed_by,
                                        pgqueue.bounded_error(p_error)),
         claimed_by = NULL, claimed_at = NULL, lease_until = NULL, updated_at = now()
   WHERE j.id = p_job_id;
  PERFORM pgqueue.floor_admit(v_job.queue, v_job.priority, now() + v_delay, p_job_id);
  -- Also when the retry is due later: an idle claimer then learns its due time (wait_hint).
  PERFORM pgqueue.notify_queue(v_job.queue);
  PERFORM pgqueue.slots_freed(ARRAY[v_job.queue]);
  RETURN 'requeued';
END
$$;

-- Gives back a held job without counting the attempt (a worker shutting down): ready at once.
-- False when the lease is lost. The attempt is given back; the lease token is not.
CREATE OR REPLACE FUNCTION pgqueue.release(
  p_job_id bigint,
  p_worker_id text,
  p_lease_token bigint DEFAULT NULL
)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_queue text;
  v_priority int;
BEGIN
  IF p_job_id IS NULL OR p_worker_id IS NULL THEN
    PERFORM pgqueue.require(p_job_id, 'job_id');
    PERFORM pgqueue.require(p_worker_id, 'worker_id');
  END IF;
  UPDATE pgqueue.jobs j
     SET state = 'ready', attempts = j.attempts - 1, run_after = now(), claimed_by = NULL,
         claimed_at = NULL, lease_until = NULL, updated_at = now()
   WHERE j.id = p_job_id
     AND (j.state = 'claimed') IS TRUE
     AND j.claimed_by = p_worker_id
     AND (p_lease_token IS NULL OR j.lease_token = p_lease_token)
  RETURNING j.queue, j.priority INTO v_queue, v_priority;
  IF v_queue IS NULL THEN
    RETURN false;
  END IF;
  PERFORM pgqueue.floor_admit(v_queue, v_priority, now(), p_job_id);
  PERFORM pgqueue.notify_queue(v_queue);
  PERFORM pgqueue.slots_freed(ARRAY[v_queue]);
  RETURN true;
END
$$;

-- What became of claims whose final operation's answer was lost (a dropped connection): how
-- many of the jobs p_job_ids were acked by p_worker_id under the claims p_lease_tokens. For
-- clients that send an ack again after a reconnect; the worker role may call it (it may not
-- read the table).
CREATE OR REPLACE FUNCTION pgqueue.count_acked(
  p_job_ids bigint[],
  p_worker_id text,
  p_lease_tokens bigint[]
)
RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
  PERFORM pgqueue.require(p_job_ids, 'job_ids');
  PERFORM pgqueue.require(p_worker_id, 'worker_id');
  PERFORM pgqueue.require(p_lease_tokens, 'lease_tokens');
  PERFORM pgqueue.require_valid(
    cardinality(p_lease_tokens) = cardinality(p_job_ids),
    format('%s lease tokens for %s job ids', cardinality(p_lease_tokens), cardinality(p_job_ids)));
  -- Shaped as ack_batch's statement, for the same reasons (the OR keeps the subplan hashed).
  RETURN (SELECT count(*) FROM pgqueue.jobs j
           WHERE j.id = ANY (p_job_ids) AND (j.state = 'done') IS TRUE
             AND j.claimed_by = p_worker_id
             AND (p_lease_tokens IS NULL
                  OR (j.id, j.lease_token) IN (SELECT u.id, u.token
                                                 FROM unnest(p_job_ids, p_lease_tokens) AS u(id, token))));
END
$$;

-- The state of a job as far as one claim of it is concerned: its state ('ready', 'claimed',
-- 'done', 'dead', 'cancelled') while no later claim was made (the lease token is still
-- p_lease_token) and, when claimed or done, p_worker_id holds or finished it; otherwise
-- 'lost'. How a client learns whether its nack or release took effect when the answer was
-- lost.
CREATE OR REPLACE FUNCTION pgqueue.lease_outcome(
  p_job_id bigint,
  p_worker_id text,
  p_lease_token bigint
)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
BEGIN
  PERFORM pgqueue.require(p_job_id, 'job_id');
  PERFORM pgqueue.require(p_worker_id, 'worker_id');
  PERFORM pgqueue.require(p_lease_token, 'lease_token');
  RETURN coalesce((
    SELECT j.state FROM pgqueue.jobs j
     WHERE j.id = p_job_id AND j.lease_token = p_lease_token
       AND (j.state NOT IN ('claimed', 'done') OR j.claimed_by = p_worker_id)), 'lost');
END
$$;
