-- ── claim ─────────────────────────────────────────────────────────────────────────────────

-- The distinct priorities of a queue's ready jobs, highest first, each with its earliest
-- run_after: one index probe per priority, from the priority's floor.
CREATE OR REPLACE FUNCTION pgqueue.ready_priorities(p_queue text)
RETURNS TABLE (priority int, first_run_after timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
SET enable_bitmapscan = off
AS $$
BEGIN
  RETURN QUERY
  SELECT f.priority, n.run_after
    FROM pgqueue.floor_starts(p_queue) f
   CROSS JOIN LATERAL (
     SELECT j.run_after FROM pgqueue.jobs j
      WHERE j.queue = p_queue AND j.state = 'ready' AND j.priority = f.priority
        AND (j.run_after, j.id) >= (f.run_after, f.id)
      ORDER BY j.run_after, j.id LIMIT 1) n
   ORDER BY f.priority DESC;
END
$$;

-- Fires due schedules (fire_schedules) and takes back expired leases
-- (janitor_reset_stale_claims) when that is due: at most once
-- per pgqueue.maintenance.janitor_every across the database, by whichever claim gets there
-- first. Claims call it, so expired leases come back whatever the fleet claims with; each
-- session at most once a second (claim_batch checks the session setting
-- pgqueue.maintenance_checked_at, which this sets), since a call and a read of the one-row
-- table per claim cost busy workers 5-15% of their claims. Returns how many jobs it changed.
-- Paced by its cost: the next run is due no sooner than 50 times this run's duration, so it
-- takes at most about 2% of one backend. That matters while a long transaction holds the
-- horizon: the janitor then reads every claimed-job version left since (85 ms per run after
-- 2 minutes at 5,000 jobs/s), and a claim that runs it waits for it. Bitmap scans on again:
-- claims turn them off for the floors, and the janitor may read many rows.
CREATE OR REPLACE FUNCTION pgqueue.maintain_if_due()
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_bitmapscan = on
AS $$
DECLARE
  v_started timestamptz;
  v_changed int;
  v_fired int := 0;
BEGIN
  PERFORM set_config('pgqueue.maintenance_checked_at', extract(epoch FROM now())::text, false);
  -- Periodic jobs whose slot has come, whenever this session checks (not paced with the
  -- janitor: a janitor slowed by load must not make slots late). The rows' locks make each
  -- slot fire once however many sessions get here at once.
  IF EXISTS (SELECT FROM pgqueue.schedules s WHERE s.next_slot <= now()) THEN
    v_fired := pgqueue.fire_schedules();
  END IF;
  IF (SELECT m.janitor_due_at FROM pgqueue.maintenance m) > now()
     OR NOT pg_try_advisory_xact_lock(8100266002545501543) THEN
    RETURN v_fired;
  END IF;
  -- Under the lock, the row says whether another transaction did it meanwhile.
  UPDATE pgqueue.maintenance m SET janitor_due_at = now() + m.janitor_every
   WHERE m.janitor_due_at <= now();
  IF NOT FOUND THEN
    RETURN v_fired;
  END IF;
  v_started := clock_timestamp();
  v_changed := v_fired + pgqueue.janitor_reset_stale_claims();
  UPDATE pgqueue.maintenance m
     SET janitor_due_at = now() + (clock_timestamp() - v_started) * 50
   WHERE m.janitor_due_at < now() + (clock_timestamp() - v_started) * 50;
  RETURN v_changed;
END
$$;

-- Claims up to p_limit due jobs of a queue for p_worker_id: highest priority first, then the
-- job due longest, then the lowest id (the rows come back in that order). SKIP LOCKED lets concurrent claimers take different
-- jobs without waiting. Each claim counts an attempt and takes a new lease_token, the fencing
-- token that heartbeat, ack, nack and release take. Runs due maintenance first (expired
-- leases taken back, at most once a second database-wide), so their jobs can be claimed here.
-- Generic plans: planning the claim on every call was a third of its cost (custom plans win
-- the plan cache's comparison because a generic LIMIT looks large; the update goes through
-- the primary key either way, as `id = ANY (ARRAY(...))`).
CREATE OR REPLACE FUNCTION pgqueue.claim_batch(
  p_queue text,
  p_worker_id text,
  p_limit int DEFAULT 1,
  p_lease_for interval DEFAULT '5 minutes'::interval
)
RETURNS TABLE (
  id bigint,
  queue text,
  payload jsonb,
  priority int,
  attempts int,
  max_attempts int,
  claimed_at timestamptz,
  lease_until timestamptz,
  lease_token bigint,
  run_after timestamptz  -- when the job became due: claimed_at - run_after is its wait
)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  v_floor_check text;
  v_floor_due timestamptz;
  v_limits pgqueue.queue_limits;
  v_limited boolean;
  v_paused boolean;
  v_older_snapshot boolean;
  v_held boolean;
  v_checked boolean := false;
  v_limit int := p_limit;
  v_now timestamptz;
  v_tokens float8;
  v_got int;
  v_claimed_at timestamptz := now();
BEGIN
  IF p_queue IS NULL OR p_worker_id IS NULL OR p_limit IS NULL OR p_lease_for IS NULL
     OR p_limit NOT BETWEEN 1 AND 10000 OR p_lease_for <= interval '0'
     OR octet_length(p_queue) NOT BETWEEN 1 AND 255 OR p_queue ~ '[[:cntrl:]]'
     OR octet_length(p_worker_id) > 255 THEN
    PERFORM pgqueue.check_queue_name(p_queue);
    PERFORM pgqueue.require(p_worker_id, 'worker_id');
    PERFORM pgqueue.require_valid(octet_length(p_worker_id) <= 255,
                                  'worker_id must be at most 255 bytes');
    PERFORM pgqueue.require(p_limit, 'limit');
    PERFORM pgqueue.require(p_lease_for, 'lease_for');
    PERFORM pgqueue.require_valid(p_limit BETWEEN 1 AND 10000, 'limit must be between 1 and 10000');
    PERFORM pgqueue.require_valid(p_lease_for > interval '0', 'lease_for must be positive');
  END IF;
  IF extract(epoch FROM now()) >= coalesce(nullif(current_setting(
       'pgqueue.maintenance_checked_at', true), ''), '0')::float8 + 1 THEN
    -- (Counting in this session's own slot meanwhile: see count_failed.)
    PERFORM set_config('pgqueue.maintaining', 'on', true);
    PERFORM pgqueue.maintain_if_due();
    PERFORM set_config('pgqueue.maintaining', 'off', true);
  END IF;
  -- Whether the queue's floors are due to move: looked at only once the time this session
  -- noted for it has come (a session setting, as maintenance), since the look read two tables
  -- on every claim, a third of an idle claim's cost. The time noted is when the floors are a
  -- second old (as they move at most once a second), or at once while jobs are noted below
  -- them (the move was skipped: a producer's transaction was open). Between looks, jobs noted
  -- below a floor are still claimed (claims start at the lower of the two).
  -- A move holds the floor lock until this transaction ends (producers do not wait for it,
  -- but the next move, pause and set_queue_limits do): only when the claim is most likely a
  -- transaction of its own (it began with this statement, within 5 ms: the extended protocol
  -- starts it at Parse), not a statement in a longer one. (A BEGIN sent just before looks the
  -- same from here.) The time is kept in one of 256 session settings, by a hash of the queue
  -- (as enqueue's floor_known: a setting per queue made each new one slower to add); two
  -- queues with the same slot share a time, which can only move a look by up to a second.
  IF statement_timestamp() - transaction_timestamp() < interval '5 milliseconds' THEN
    v_floor_check := 'pgqueue.floor_due_' || (hashtext(p_queue) & 255);
    IF extract(epoch FROM now()) >= coalesce(nullif(current_setting(v_floor_check, true), ''),
                                             '0')::float8 THEN
      IF EXISTS (SELECT FROM pgqueue.ready_floor f
                  WHERE f.queue = p_queue AND f.moved_at < now() - interval '1 second'
                 UNION ALL
                 SELECT FROM pgqueue.ready_floor_below b WHERE b.queue = p_queue) THEN
        PERFORM pgqueue.floor_advance(p_queue);
      END IF;
      SELECT min(f.moved_at) + interval '1 second' INTO v_floor_due
        FROM pgqueue.ready_floor f WHERE f.queue = p_queue;
      IF EXISTS (SELECT FROM pgqueue.ready_floor_below b WHERE b.queue = p_queue) THEN
        v_floor_due := now();
      END IF;
      PERFORM set_config(v_floor_check,
                         extract(epoch FROM coalesce(v_floor_due, now() + interval '1 second'))::text,
                         false);
    END IF;
  END IF;
  -- One statement: the priorities' floors, highest first, and for each the jobs from its floor
  -- in run_after order, so the scan stops at the first job not yet due instead of reading past
  -- every scheduled job (a backlog of future jobs would otherwise make each claim read all of
  -- them), and starts past the dead entries below the floor. The nested loop yields a
  -- priority's jobs in the index's order and reaches the next priority only while the limit is
  -- not met, so no row is locked that is not claimed (but those another claimer holds: SKIP
  -- LOCKED passes them). The first pass is the whole claim of a queue without pause or limits
  -- (the hot path); a second pass claims under the limits.
  LOOP
    RETURN QUERY
    WITH next_jobs AS (
      SELECT n.id
        FROM pgqueue.floor_starts(p_queue) f
       CROSS JOIN LATERAL (
         SELECT j.id
           FROM pgqueue.jobs j
          WHERE j.queue = p_queue
            AND j.state = 'ready'
            AND j.priority = f.priority
            AND (j.run_after, j.id) >= (f.run_after, f.id)
            AND j.run_after <= now()
            AND j.attempts < j.max_attempts
          ORDER BY j.run_after, j.id
          LIMIT v_limit
            FOR UPDATE SKIP LOCKED) n
       WHERE f.run_after <= now()
         -- The first pass claims only when the queue has floors and none is held (paused or
         -- limited: floor_hold keeps that true; floor_starts says it in every row) and the
         -- snapshot is this statement's.
         AND (v_checked
              OR (f.held IS FALSE
                  AND current_setting('transaction_isolation') = 'read committed'))
       ORDER BY f.priority DESC
       LIMIT v_limit
    ), claimed AS (
      UPDATE pgqueue.jobs j
         SET state = 'claimed',
             claimed_by = p_worker_id,
             claimed_at = v_claimed_at,
             lease_until = v_claimed_at + p_lease_for,
             attempts = j.attempts + 1,
             lease_token = CASE WHEN j.lease_token < 0 THEN greatest(j.attempts, j.max_attempts)
                                ELSE greatest(j.lease_token, j.attempts) END + 1,
             updated_at = now()
       WHERE j.id = ANY (ARRAY(SELECT n.id FROM next_jobs n))
      RETURNING j.id, j.queue, j.payload, j.priority, j.attempts, j.max_attempts, j.claimed_at,
                j.lease_until, j.lease_token, j.run_after
    )
    SELECT c.id, c.queue, c.payload, c.priority, c.attempts, c.max_attempts, c.claimed_at,
           c.lease_until, c.lease_token, c.run_after
      FROM claimed c
     ORDER BY c.priority DESC, c.run_after, c.id;  -- claim order
    GET DIAGNOSTICS v_got = ROW_COUNT;
    EXIT WHEN v_got > 0 OR v_checked;
    -- Nothing claimed: no job was due, or the queue is paused or limited, or the snapshot is
    -- older than this statement. Only now a statement of its own looks which (a paused queue
    -- hands nothing out; a limited one (47_limits.sql) no more than its limits leave): as a
    -- statement before every claim it cost busy claims 10%.
    v_checked := true;
    SELECT EXISTS (SELECT FROM pgqueue.paused_queues pq WHERE pq.queue = p_queue),
           EXISTS (SELECT FROM pgqueue.queue_limits l WHERE l.queue = p_queue),
           current_setting('transaction_isolation') <> 'read committed',
           (SELECT bool_or(h.held) FROM pgqueue.ready_floor h WHERE h.queue = p_queue)
             IS NOT FALSE
      INTO v_paused, v_limited, v_older_snapshot, v_held;
    IF v_paused THEN
      RETURN;
    END IF;
    IF NOT (v_limited OR v_older_snapshot) THEN
      -- Neither limited nor an older snapshot: the first pass found no job due, unless it
      -- did not run (a floor still held from a pause or limit lifted since, or no floor
      -- yet): then claim now. (A pause or a limit lifted between the two statements gives
      -- one empty answer, as racing it would.)
      IF NOT v_held THEN
        RETURN;
      END IF;
      CONTINUE;
    END IF;
    -- An older snapshot than this statement's (REPEATABLE READ, SERIALIZABLE) may not see limits
    -- set since: locking the row set_queue_limits writes makes such a claim fail (40001) instead.
    IF v_older_snapshot THEN
      PERFORM FROM pgqueue.queue_limits_changed FOR SHARE;
      v_limited := v_limited OR EXISTS (SELECT FROM pgqueue.queue_limits l WHERE l.queue = p_queue);
    END IF;
    IF v_limited THEN
      -- Claims of the queue take turns on its row, so the count below sees every claim
      -- committed before this one.
      SELECT l.* INTO v_limits FROM pgqueue.queue_limits l WHERE l.queue = p_queue FOR UPDATE;
      v_limited := FOUND;  -- (removed meanwhile: no limit)
      -- A pause committed while this claim waited for the row (this statement sees it).
      IF EXISTS (SELECT FROM pgqueue.paused_queues pq WHERE pq.queue = p_queue) THEN
        RETURN;
      END IF;
    END IF;
    IF v_limited THEN
      -- The lease counts from now, not from the transaction's start: this claim may have waited
      -- for the row lock (behind another claim's commit, or a transaction that holds it).
      v_now := clock_timestamp();
      v_claimed_at := v_now;
      IF v_limits.max_claimed IS NOT NULL THEN
        v_limit := least(v_limit, v_limits.max_claimed - (
          SELECT count(*) FROM (SELECT FROM pgqueue.jobs j
                                 WHERE j.queue = p_queue AND j.state = 'claimed'
                                 LIMIT v_limits.max_claimed) c)::int);
      END IF;
      IF v_limits.rate IS NOT NULL THEN
        v_tokens := pgqueue.tokens_at(v_limits, v_now);
        v_limit := least(v_limit, floor(v_tokens)::int);
      END IF;
      IF v_limit < 1 THEN
        RETURN;
      END IF;
    END IF;
  END LOOP;
  IF v_limited THEN
    -- Tokens taken; and a write in every limited claim, so that a claim in REPEATABLE READ
    -- whose snapshot predates this one fails to lock the row (40001) instead of counting
    -- claimed jobs without this one's.
    UPDATE pgqueue.queue_limits l
       SET tokens = coalesce(v_tokens - v_got, l.tokens), refilled_at = v_now
     WHERE l.queue = p_queue;
  END IF;
END
$$;

-- The seed's one-job claim: claim_batch with a limit of 1 (no row when nothing is due).
CREATE OR REPLACE FUNCTION pgqueue.claim_next(
  p_queue text,
  p_worker_id text,
  p_lease_for interval DEFAULT '5 minutes'::interval
)
RETURNS TABLE (
  id bigint,
  queue text,
  payload jsonb,
  priority int,
  attempts int,
  max_attempts int,
  claimed_at timestamptz,
  lease_until timestamptz,
  lease_token bigint
)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN QUERY SELECT c.id, c.queue, c.payload, c.priority, c.attempts, c.max_attempts,
                      c.claimed_at, c.lease_until, c.lease_token
                 FROM pgqueue.claim_batch(p_queue, p_worker_id, 1, p_lease_for) c;
END
$$;

-- When the next job of a queue becomes due (NULL when it has no ready job); an idle worker
-- sleeps until then at most.
CREATE OR REPLACE FUNCTION pgqueue.next_run_after(p_queue text)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pgqueue.check_queue_name(p_queue);
  RETURN (SELECT min(p.first_run_after) FROM pgqueue.ready_priorities(p_queue) p);
END
$$;

-- What an idle claimer should wait for, after a claim found nothing: `due_now` says a ready job
-- is already due (so it is row-locked by another transaction, or out of attempts: re-check
-- with a back-off, not at once), `next_due` is when the next job not yet due becomes due
-- (NULL when none). `held`: a limit of the queue holds it (47_limits.sql), so until next_due
-- only a notification that a place freed (payload 'QUEUE\nfreed') can change that; enqueues'
-- notifications need not wake the claimer. One index probe or two per priority, however many
-- jobs wait.
CREATE OR REPLACE FUNCTION pgqueue.wait_hint(p_queue text)
RETURNS TABLE (due_now boolean, next_due timestamptz, held boolean)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_slot timestamptz;
  v_due_now boolean;
  v_next timestamptz;
  v_limits pgqueue.queue_limits;
  v_tokens float8;
  v_token_due timestamptz;
  v_held boolean := false;
BEGIN
  IF p_queue IS NULL OR octet_length(p_queue) NOT BETWEEN 1 AND 255 OR p_queue ~ '[[:cntrl:]]' THEN
    PERFORM pgqueue.check_queue_name(p_queue);
  END IF;
  -- Paused: nothing is due, nothing falls due; resume wakes the claimer.
  IF EXISTS (SELECT FROM pgqueue.paused_queues pq WHERE pq.queue = p_queue) THEN
    RETURN QUERY SELECT false, NULL::timestamptz, false;
    RETURN;
  END IF;
  -- The queue's next schedule slot counts as a job falling due, once the maintenance that
  -- fires it can run in this session's next claim (at most once a second per session): an
  -- idle worker sleeps until then instead of polling.
  v_slot := (SELECT min(s.next_slot) FROM pgqueue.schedules s WHERE s.queue = p_queue);
  IF v_slot IS NOT NULL THEN
    -- (Not sooner than 20 ms: while another transaction holds the maintenance lock, a slot
    -- that is due stays unfired for a moment.)
    v_slot := greatest(v_slot,
                       to_timestamp(coalesce(nullif(current_setting(
                         'pgqueue.maintenance_checked_at', true), ''), '0')::float8 + 1),
                       now() + interval '20 milliseconds');
  END IF;
  SELECT coalesce(bool_or(p.first_run_after <= now()), false),
         least(min((SELECT j.run_after FROM pgqueue.jobs j
                     WHERE j.queue = p_queue AND j.state = 'ready' AND j.priority = p.priority
                       AND j.run_after > now() AND j.run_after < 'infinity'
                       AND j.attempts < j.max_attempts
                     ORDER BY j.run_after LIMIT 1)), v_slot)
    INTO v_due_now, v_next
    FROM pgqueue.ready_priorities(p_queue) p;  -- (an aggregate: one row, even of none)
  -- A limited queue: at its concurrency limit nothing is claimable until a claimed job ends,
  -- which wakes the queue (pgqueue.slots_freed); with its bucket empty, nothing starts before
  -- the next token (a millisecond late, so the claim then finds it whole). Every idle claimer
  -- wakes then, and one takes the tokens: at a high rate they wake once tokens for 20 ms have
  -- gathered (up to the burst), so no claimer wakes more than about 50 times a second.
  SELECT l.* INTO v_limits FROM pgqueue.queue_limits l WHERE l.queue = p_queue;
  IF FOUND THEN
    IF v_limits.max_claimed IS NOT NULL
       AND (SELECT count(*) FROM (SELECT FROM pgqueue.jobs j
                                   WHERE j.queue = p_queue AND j.state = 'claimed'
                                   LIMIT v_limits.max_claimed) c) >= v_limits.max_claimed THEN
      v_held := v_due_now;
      v_due_now := false;
    ELSIF v_limits.rate IS NOT NULL THEN
      v_tokens := pgqueue.tokens_at(v_limits, clock_timestamp());
      IF v_tokens < 1 THEN
        v_token_due := clock_timestamp()
                       + v_limits.rate_period
                         * ((least(v_limits.burst::float8,
                                   greatest(1, v_limits.rate * 0.02
                                               / extract(epoch FROM v_limits.rate_period)::float8))
                             - v_tokens) / v_limits.rate)
                       + interval '1 millisecond';
        v_next := CASE WHEN v_due_now THEN v_token_due
                       WHEN v_next IS NOT NULL THEN greatest(v_next, v_token_due) END;
        v_held := v_due_now;
        v_due_now := false;
      END IF;
    END IF;
  END IF;
  RETURN QUERY SELECT v_due_now, v_next, v_held;
END
$$;
