-- pgqueue: a durable job queue in plain PostgreSQL (no extension).
--
-- This one file installs the `pgqueue` schema into a database or upgrades an older install
-- (including the original seed design) in place, keeping every job. Run it with
--     psql -v ON_ERROR_STOP=1 -f sql/pgqueue.sql
-- or through pgqueue::migrate() in C++, which applies this same text. Running it again changes
-- nothing; two sessions running it at once serialise on an advisory lock; a file older than the
-- installed schema refuses to run instead of downgrading. No psql meta-commands: the text must
-- also run as a single simple-protocol script.
--
-- Schema versions: 1 = the seed design (no version table), 2 = the first pgqueue release,
-- 3 = lease tokens that only grow, maintenance inside claims, 4 = this file (claims start at a
-- per-queue floor, so dead index entries left behind a long transaction are not read).

BEGIN;
SET LOCAL client_min_messages = warning;

-- Serialise concurrent installs before touching the catalog ('pgqueue' as a 64-bit key).
DO $$ BEGIN PERFORM pg_catalog.pg_advisory_xact_lock(8100266002545501541); END $$;

CREATE SCHEMA IF NOT EXISTS pgqueue;

CREATE TABLE IF NOT EXISTS pgqueue.schema_version (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version int NOT NULL,
  installed_at timestamptz NOT NULL DEFAULT now()
);

-- Which version are we upgrading from? 0 = nothing installed, 1 = the seed (a jobs table but
-- no version row). Kept in a transaction-local setting for the steps below.
DO $$
DECLARE
  v_from int;
BEGIN
  SELECT version INTO v_from FROM pgqueue.schema_version;
  IF v_from IS NULL THEN
    v_from := CASE WHEN to_regclass('pgqueue.jobs') IS NULL THEN 0 ELSE 1 END;
  END IF;
  IF v_from > 4 THEN
    RAISE EXCEPTION 'pgqueue: the installed schema is version %, newer than this file (version 4)', v_from
      USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'Use the sql/pgqueue.sql shipped with the newer pgqueue; downgrades are refused.';
  END IF;
  PERFORM set_config('pgqueue.migrating_from', v_from::text, true);
END
$$;

-- Who may execute which pgqueue function now: functions whose signature changes are dropped
-- and created again below, which would lose their grants; the privileges step at the end
-- grants them again from this list (and the current worker/producer sets to roles that had
-- them). Dropped at commit.
CREATE TEMPORARY TABLE IF NOT EXISTS pgqueue_migration_grants (proname name, grantee oid)
  ON COMMIT DROP;
INSERT INTO pgqueue_migration_grants
SELECT DISTINCT p.proname, a.grantee
  FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
 WHERE to_regnamespace('pgqueue') IS NOT NULL
   AND p.pronamespace = to_regnamespace('pgqueue')
   AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner;

-- ── tables ────────────────────────────────────────────────────────────────────────────────
-- The seed's shape; version 2 changes indexes and constraints below, not columns, so seed
-- callers that read the table directly keep working.
CREATE TABLE IF NOT EXISTS pgqueue.jobs (
  id bigserial PRIMARY KEY,
  queue text NOT NULL,
  payload jsonb NOT NULL,
  idempotency_key text,
  state text NOT NULL DEFAULT 'ready'
    CHECK (state IN ('ready', 'claimed', 'done', 'dead')),
  priority int NOT NULL DEFAULT 0,          -- higher = sooner
  run_after timestamptz NOT NULL DEFAULT now(),
  attempts int NOT NULL DEFAULT 0,          -- attempts used (release gives one back)
  max_attempts int NOT NULL DEFAULT 5,
  last_error text,                          -- the most recent error, at most 2000 characters
  claimed_by text,
  claimed_at timestamptz,
  lease_until timestamptz,                  -- in no index, so a heartbeat is a HOT update
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);

-- The fencing token of the current (or last) claim: it only grows (each claim takes a larger
-- one; release and retry_dead do not lower it, unlike `attempts`), so a stale holder's ack,
-- nack, release or heartbeat (e.g. one sent again after a reconnect) can never match a later
-- claim. Rows from versions without it read -1 (added without rewriting the table): their
-- first claim jumps past every attempt number, which is what those versions fenced with.
ALTER TABLE pgqueue.jobs ADD COLUMN IF NOT EXISTS lease_token bigint NOT NULL DEFAULT -1;
ALTER TABLE pgqueue.jobs ALTER COLUMN lease_token SET DEFAULT 0;

-- Completed jobs counted per queue, so pgqueue.depth never counts retained rows. Rows are
-- sharded by backend (slot) so concurrent ackers rarely wait on each other's counter row.
CREATE TABLE IF NOT EXISTS pgqueue.done_counts (
  queue text NOT NULL,
  slot int NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (queue, slot)
);

-- Retry back-off per queue; the row with queue '' (not a valid queue name) is the default.
CREATE TABLE IF NOT EXISTS pgqueue.queue_settings (
  queue text PRIMARY KEY,
  retry_base interval NOT NULL CHECK (retry_base >= interval '0'),
  retry_max interval NOT NULL CHECK (retry_max >= retry_base)
);
INSERT INTO pgqueue.queue_settings VALUES ('', interval '1 second', interval '1 hour')
  ON CONFLICT (queue) DO NOTHING;

-- When maintenance (taking back expired leases) is next due. Claims run it when due, so
-- expired leases come back whatever API the fleet uses (worker, claim loops or plain SQL).
CREATE TABLE IF NOT EXISTS pgqueue.maintenance (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  janitor_due_at timestamptz NOT NULL DEFAULT now(),
  janitor_every interval NOT NULL DEFAULT interval '1 second' CHECK (janitor_every > interval '0')
);
INSERT INTO pgqueue.maintenance (singleton) VALUES (true) ON CONFLICT (singleton) DO NOTHING;

-- Where claims start reading a queue's ready jobs, per priority: a position (run_after, id) in
-- claim order at or below every ready job of that queue and priority. A claim turns a ready row
-- into a claimed one and leaves its entry in the ready index behind, dead; vacuum removes such
-- entries only once no transaction may still see the row, so while one long transaction is
-- open they pile up at the head of the index, and a claim that started at the head would read
-- them all (a queue at 5,000 jobs/s fell to a seventh of its rate within 3 minutes). Claims
-- start here instead. Only pgqueue.floor_advance writes this table (claims call it at most
-- once a second per queue): it moves each floor up to the first ready job. Rows are never
-- removed (a priority that empties keeps its row).
CREATE TABLE IF NOT EXISTS pgqueue.ready_floor (
  queue text NOT NULL,
  priority int NOT NULL,
  run_after timestamptz NOT NULL,
  id bigint NOT NULL,
  moved_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (queue, priority)
) WITH (fillfactor = 20);  -- room for the moves to stay on the page (HOT)

-- Jobs made ready below their floor, or at a priority without one (pgqueue.floor_admit):
-- claims start at the lower of the floor and these, and floor_advance folds them into the
-- floors. Inserted, never updated, so writers never wait on each other here.
CREATE TABLE IF NOT EXISTS pgqueue.ready_floor_below (
  queue text NOT NULL,
  priority int NOT NULL,
  run_after timestamptz NOT NULL,
  id bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS ready_floor_below_idx
  ON pgqueue.ready_floor_below (queue, priority DESC, run_after, id);

-- ── structural upgrade to version 2 (runs once; every step also serves a fresh install) ──
DO $$
BEGIN
  IF current_setting('pgqueue.migrating_from')::int >= 2 THEN
    RETURN;
  END IF;

  -- 'cancelled' joins the states; queue names are validated for new rows (old rows are kept
  -- as they are, hence NOT VALID).
  ALTER TABLE pgqueue.jobs DROP CONSTRAINT IF EXISTS jobs_state_check;
  ALTER TABLE pgqueue.jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('ready', 'claimed', 'done', 'dead', 'cancelled'));
  ALTER TABLE pgqueue.jobs ADD CONSTRAINT jobs_queue_name_check
    CHECK (octet_length(queue) BETWEEN 1 AND 255 AND queue !~ '[[:cntrl:]]') NOT VALID;
  -- Free space on each page lets heartbeats and acks update in place (HOT).
  ALTER TABLE pgqueue.jobs SET (fillfactor = 85);

  -- The seed's indexes: the claim index ordered by created_at (equal within a batch), the lease
  -- index that made every heartbeat an index write, and a full-table dashboard index.
  DROP INDEX IF EXISTS pgqueue.jobs_claim_idx;
  DROP INDEX IF EXISTS pgqueue.jobs_lease_idx;
  DROP INDEX IF EXISTS pgqueue.jobs_state_idx;
  -- Claim order: priority, then when the job became due, then id. run_after in the key lets
  -- the scan skip jobs that are not yet due without visiting the heap.
  CREATE INDEX IF NOT EXISTS jobs_ready_idx
    ON pgqueue.jobs (queue, priority DESC, run_after, id) WHERE state = 'ready';
  CREATE INDEX IF NOT EXISTS jobs_claimed_idx ON pgqueue.jobs (queue) WHERE state = 'claimed';
  CREATE INDEX IF NOT EXISTS jobs_stuck_idx
    ON pgqueue.jobs (queue, state) WHERE state IN ('dead', 'cancelled');
  CREATE INDEX IF NOT EXISTS jobs_finished_idx
    ON pgqueue.jobs (state, finished_at) WHERE state IN ('done', 'dead', 'cancelled');
  -- Kept from the seed: same (queue, key) is the same job.
  CREATE UNIQUE INDEX IF NOT EXISTS jobs_idem_idx
    ON pgqueue.jobs (queue, idempotency_key) WHERE idempotency_key IS NOT NULL;

  -- Completed jobs already retained (an upgraded seed) start the counters.
  INSERT INTO pgqueue.done_counts (queue, slot, n)
    SELECT queue, 0, count(*) FROM pgqueue.jobs WHERE state = 'done' GROUP BY queue
    ON CONFLICT (queue, slot) DO UPDATE SET n = pgqueue.done_counts.n + EXCLUDED.n;

  -- Seed signatures that gained arguments: dropped so the new ones do not overload them
  -- ambiguously. Positional calls with the old arguments resolve to the new functions.
  DROP FUNCTION IF EXISTS pgqueue.enqueue(text, jsonb, text, int, timestamptz);
  DROP FUNCTION IF EXISTS pgqueue.heartbeat(bigint, text, interval);
  DROP FUNCTION IF EXISTS pgqueue.ack(bigint, text);
  DROP FUNCTION IF EXISTS pgqueue.nack(bigint, text, text, interval);
  DROP FUNCTION IF EXISTS pgqueue.gc(interval, interval);
END
$$;

-- ── structural upgrade to version 3 (runs once) ────────────────────────────────────────────
DO $$
BEGIN
  IF current_setting('pgqueue.migrating_from')::int >= 3 THEN
    RETURN;
  END IF;
  -- Lease operations take the claim's lease_token (bigint) where version 2 took the attempt
  -- (int), and claims return it: the old signatures go (their grants are restored at the end).
  DROP FUNCTION IF EXISTS pgqueue.claim_batch(text, text, int, interval);
  DROP FUNCTION IF EXISTS pgqueue.claim_next(text, text, interval);
  DROP FUNCTION IF EXISTS pgqueue.heartbeat(bigint, text, interval, int);
  DROP FUNCTION IF EXISTS pgqueue.ack(bigint, text, int);
  DROP FUNCTION IF EXISTS pgqueue.ack_batch(bigint[], text, int[]);
  DROP FUNCTION IF EXISTS pgqueue.nack(bigint, text, text, interval, int);
  DROP FUNCTION IF EXISTS pgqueue.release(bigint, text, int);
  -- Jobs held right now keep working for their holders, which fence with the attempt.
  UPDATE pgqueue.jobs SET lease_token = attempts WHERE state = 'claimed';
END
$$;

-- ── structural upgrade to version 4 (runs once) ────────────────────────────────────────────
DO $$
BEGIN
  IF current_setting('pgqueue.migrating_from')::int >= 4 THEN
    RETURN;
  END IF;
  -- No writer may add a ready job between the floors' computation and this commit: enqueues
  -- of the old version would not lower them.
  LOCK TABLE pgqueue.jobs IN SHARE MODE;
  -- At the first ready job, or at the current time when that is later (floor_admit's rule).
  INSERT INTO pgqueue.ready_floor (queue, priority, run_after, id)
  SELECT h.queue, h.priority,
         CASE WHEN h.run_after < clock_timestamp() THEN h.run_after ELSE clock_timestamp() END,
         CASE WHEN h.run_after < clock_timestamp() THEN h.id ELSE 0 END
    FROM (SELECT DISTINCT ON (j.queue, j.priority) j.queue, j.priority, j.run_after, j.id
            FROM pgqueue.jobs j
           WHERE j.state = 'ready'
           ORDER BY j.queue, j.priority, j.run_after, j.id) h
  ON CONFLICT (queue, priority) DO NOTHING;
END
$$;

-- Ready jobs with no attempts left (only the seed's janitor left such rows): normally empty, so
-- the janitor finds them without reading every ready job. Outside the version-2 step so that
-- installs of this version made before the index existed get it too.
CREATE INDEX IF NOT EXISTS jobs_exhausted_idx
  ON pgqueue.jobs (id) WHERE state = 'ready' AND attempts >= max_attempts;

-- Vacuum the jobs table by a fixed count of dead rows, not a fifth of the table: with a week of
-- done jobs retained (millions of rows) the default would let millions of dead entries pile up
-- ahead of the ready jobs between runs, and every claim reads past them. Unthrottled, since each
-- run is small. Measured (benchmarks: --only soak, 8,000 jobs/s in and out, gc every 10 s): the
-- table settled 10% smaller and each run left about 100,000 dead rows instead of 500,000; how
-- often runs start stays bounded by the server's autovacuum_naptime (1 minute by default; see
-- the README). Only set while the table has no autovacuum settings, so an operator's own stay.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_class c, pg_catalog.unnest(c.reloptions) o
                  WHERE c.oid = 'pgqueue.jobs'::regclass AND o LIKE 'autovacuum%') THEN
    ALTER TABLE pgqueue.jobs SET (
      autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 20000,
      autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 20000,
      autovacuum_vacuum_cost_delay = 0);
  END IF;
END
$$;

-- ── internal helpers ──────────────────────────────────────────────────────────────────────

-- Refuses a queue name that is NULL, empty, longer than 255 bytes or has control characters.
CREATE OR REPLACE FUNCTION pgqueue.check_queue_name(p_queue text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF p_queue IS NULL THEN
    RAISE EXCEPTION 'pgqueue: queue name must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF octet_length(p_queue) NOT BETWEEN 1 AND 255 OR p_queue ~ '[[:cntrl:]]' THEN
    RAISE EXCEPTION 'pgqueue: invalid queue name (% bytes)', octet_length(p_queue)
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'A queue name is 1 to 255 bytes of text without control characters.';
  END IF;
END
$$;

-- Raises null_value_not_allowed naming the argument when a required value is NULL.
CREATE OR REPLACE FUNCTION pgqueue.require(p_value anyelement, p_name text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF p_value IS NULL THEN
    RAISE EXCEPTION 'pgqueue: % must not be NULL', p_name USING ERRCODE = 'null_value_not_allowed';
  END IF;
END
$$;

-- Raises invalid_parameter_value unless `p_ok`.
CREATE OR REPLACE FUNCTION pgqueue.require_valid(p_ok boolean, p_message text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF NOT p_ok THEN
    RAISE EXCEPTION 'pgqueue: %', p_message USING ERRCODE = 'invalid_parameter_value';
  END IF;
END
$$;

-- Helpers called on hot paths are PL/pgSQL, not SQL: a SQL function that pins search_path
-- cannot be inlined, and then plans its body again on every call (PL/pgSQL keeps its plans for
-- the session); ready_priorities alone cost a claim 0.17 ms that way.
--
-- Every function that reads pgqueue.jobs runs with enable_seqscan = off. PL/pgSQL's plans are
-- kept for the session, and a plan made while the table was empty (a new install, the first
-- minute of a queue) reads the whole table; kept until the next analyze, such a plan made
-- claims and acks read every row, live and dead, on each call. With sequential scans off the
-- planner takes the index that the statement was written for whatever the statistics say.
-- (And with jit = off: a table it must still scan whole, such as pgqueue.maintenance, gets a
-- huge cost that would otherwise make every first call of a session JIT-compile, 30-90 ms.)

-- The LISTEN channel of a queue. A hash keeps every valid name (up to 255 bytes) under the
-- 63-byte channel limit and makes the channel a plain identifier; the payload carries the name.
-- Plain SQL without SECURITY DEFINER or SET clauses, every name qualified (it reads no table,
-- and a caller's search_path cannot redirect it), so that the planner inlines it into the
-- insert trigger: a call there cost each enqueue about 2 us.
CREATE OR REPLACE FUNCTION pgqueue.channel(p_queue text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT 'pgqueue_' OPERATOR(pg_catalog.||) pg_catalog.md5(p_queue) $$;

-- Wakes listeners of a queue in the current transaction (delivered at commit). Identical
-- (channel, payload) pairs fold within a transaction, so this sends at most one notification
-- per queue per transaction however often it is called.
CREATE OR REPLACE FUNCTION pgqueue.notify_queue(p_queue text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM pg_notify(pgqueue.channel(p_queue), p_queue); END $$;

-- ── wake-ups ──────────────────────────────────────────────────────────────────────────────

-- Wakes listeners of a queue from its own transaction, after the jobs it announces committed.
-- NOTIFY holds a cluster-wide lock from pre-commit to the end of the commit; in a transaction
-- that has written nothing else, this function turns off synchronous_commit so that lock is
-- never held across a WAL flush and producers are not serialised by their wake-ups (a lost
-- wake-up is harmless: workers also poll). Cost: one short transaction.
CREATE OR REPLACE FUNCTION pgqueue.wake(p_queue text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pgqueue.check_queue_name(p_queue);
  IF pg_current_xact_id_if_assigned() IS NULL THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  PERFORM pgqueue.notify_queue(p_queue);
END
$$;

-- The insert trigger: any INSERT into pgqueue.jobs (enqueue's, or a direct one) admits its
-- ready jobs below their claim floors and wakes the listeners of each queue that received a
-- ready job, once per statement. Jobs due later wake them too: an idle claimer then learns the
-- new, earlier due time (pgqueue.wait_hint) instead of sleeping through it.
-- enqueue(..., p_wake => false) suppresses the wake-up because its caller calls wake() after
-- commit. The admission is pgqueue.floor_admit's, written out here: on the one-job enqueue,
-- calling it and notify_queue (each SECURITY DEFINER with a SET clause) cost 6 us of 35.
CREATE OR REPLACE FUNCTION pgqueue.notify_new_job()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_wake boolean := current_setting('pgqueue.defer_wake', true) IS DISTINCT FROM 'on';
  v_first record;
  v_above boolean;
BEGIN
  FOR v_first IN
    SELECT DISTINCT ON (n.queue, n.priority) n.queue, n.priority, n.run_after, n.id
      FROM new_jobs n
     WHERE n.state = 'ready'
     ORDER BY n.queue, n.priority, n.run_after, n.id
  LOOP
    -- As floor_admit (see there for why the lock comes first and when a job is noted).
    PERFORM pg_advisory_xact_lock_shared(1885434739, hashtext(v_first.queue));
    SELECT (v_first.run_after, v_first.id) >= (f.run_after, f.id) INTO v_above
      FROM pgqueue.ready_floor f
     WHERE f.queue = v_first.queue AND f.priority = v_first.priority;
    IF NOT coalesce(v_above AND (current_setting('transaction_isolation') = 'read committed'
                                 OR v_first.run_after >= clock_timestamp()), false) THEN
      INSERT INTO pgqueue.ready_floor_below (queue, priority, run_after, id)
      VALUES (v_first.queue, v_first.priority, v_first.run_after, v_first.id);
    END IF;
    IF v_wake THEN
      PERFORM pg_notify(pgqueue.channel(v_first.queue), v_first.queue);  -- folds: one per queue
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;

DO $$
BEGIN
  IF current_setting('pgqueue.migrating_from')::int < 2 THEN
    -- The seed fired once per row; a statement trigger wakes once per batch.
    DROP TRIGGER IF EXISTS jobs_notify_insert ON pgqueue.jobs;
    CREATE TRIGGER jobs_notify_insert
      AFTER INSERT ON pgqueue.jobs
      REFERENCING NEW TABLE AS new_jobs
      FOR EACH STATEMENT EXECUTE FUNCTION pgqueue.notify_new_job();
  END IF;
END
$$;

-- Raises the error that enqueue's or enqueue_batch's arguments deserve (the slow path of
-- their one inline test), naming the first bad argument.
CREATE OR REPLACE FUNCTION pgqueue.check_enqueue_args(
  p_queue text, p_payload_is_null boolean, p_payload_name text, p_priority int,
  p_run_after timestamptz, p_max_attempts int, p_wake boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pgqueue.check_queue_name(p_queue);
  IF p_payload_is_null THEN
    PERFORM pgqueue.require(NULL::jsonb, p_payload_name);
  END IF;
  PERFORM pgqueue.require(p_priority, 'priority');
  PERFORM pgqueue.require(p_run_after, 'run_after');
  PERFORM pgqueue.require(p_max_attempts, 'max_attempts');
  PERFORM pgqueue.require(p_wake, 'wake');
  PERFORM pgqueue.require_valid(p_max_attempts >= 1, 'max_attempts must be at least 1');
END
$$;

-- ── enqueue ───────────────────────────────────────────────────────────────────────────────

-- Adds one job and returns its id. With an idempotency key, the job already holding that key
-- in the queue is returned instead (also under concurrent calls: no unique violation escapes).
-- Listeners are woken at commit (by the insert trigger; when the key already existed, by this
-- function, since the caller may count on it to announce other jobs too). p_wake => false
-- defers the wake-up to a pgqueue.wake(queue) the caller runs after commit.
CREATE OR REPLACE FUNCTION pgqueue.enqueue(
  p_queue text,
  p_payload jsonb,
  p_idempotency_key text DEFAULT NULL,
  p_priority int DEFAULT 0,
  p_run_after timestamptz DEFAULT now(),
  p_max_attempts int DEFAULT 5,
  p_wake boolean DEFAULT true
)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_id bigint;
BEGIN
  -- One inline test on the hot path; the helpers (a call each) only run to name the error.
  IF p_queue IS NULL OR p_payload IS NULL OR p_priority IS NULL OR p_run_after IS NULL
     OR p_max_attempts IS NULL OR p_wake IS NULL OR p_max_attempts < 1
     OR octet_length(p_queue) NOT BETWEEN 1 AND 255 OR p_queue ~ '[[:cntrl:]]' THEN
    PERFORM pgqueue.check_enqueue_args(p_queue, p_payload IS NULL, 'payload', p_priority,
                                       p_run_after, p_max_attempts, p_wake);
  END IF;
  IF NOT p_wake THEN
    PERFORM set_config('pgqueue.defer_wake', 'on', true);
  END IF;
  -- Without a key, a plain insert: ON CONFLICT makes an insert speculative, which costs a
  -- WAL record more per row even where the key's index does not apply.
  IF p_idempotency_key IS NULL THEN
    INSERT INTO pgqueue.jobs (queue, payload, priority, run_after, max_attempts)
    VALUES (p_queue, p_payload, p_priority, p_run_after, p_max_attempts)
    RETURNING id INTO v_id;
  END IF;
  WHILE v_id IS NULL LOOP
    INSERT INTO pgqueue.jobs (queue, payload, idempotency_key, priority, run_after, max_attempts)
    VALUES (p_queue, p_payload, p_idempotency_key, p_priority, p_run_after, p_max_attempts)
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN
      -- Conflict: the holder of the key committed before us (ON CONFLICT waited for it).
      SELECT j.id INTO v_id FROM pgqueue.jobs j
       WHERE j.queue = p_queue AND j.idempotency_key = p_idempotency_key;
      IF p_wake THEN
        PERFORM pgqueue.notify_queue(p_queue);
      END IF;
    END IF;
    -- Still NULL: the holder was deleted in between, so insert again.
  END LOOP;
  IF NOT p_wake THEN
    PERFORM set_config('pgqueue.defer_wake', 'off', true);
  END IF;
  RETURN v_id;
END
$$;

-- Adds many jobs to one queue in one statement and returns their ids in input order. Keys
-- (optional, same length as the payloads) dedupe against existing jobs and within the batch.
-- Wakes listeners as enqueue does (with keys, also when every key already existed).
CREATE OR REPLACE FUNCTION pgqueue.enqueue_batch(
  p_queue text,
  p_payloads jsonb[],
  p_idempotency_keys text[] DEFAULT NULL,
  p_priority int DEFAULT 0,
  p_run_after timestamptz DEFAULT now(),
  p_max_attempts int DEFAULT 5,
  p_wake boolean DEFAULT true
)
RETURNS bigint[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan  -- two of its statements were planned on every call
AS $$
DECLARE
  v_n int;
  v_ids bigint[];
BEGIN
  IF p_queue IS NULL OR p_payloads IS NULL OR p_priority IS NULL OR p_run_after IS NULL
     OR p_max_attempts IS NULL OR p_wake IS NULL OR p_max_attempts < 1
     OR octet_length(p_queue) NOT BETWEEN 1 AND 255 OR p_queue ~ '[[:cntrl:]]' THEN
    PERFORM pgqueue.check_enqueue_args(p_queue, p_payloads IS NULL, 'payloads', p_priority,
                                       p_run_after, p_max_attempts, p_wake);
  END IF;
  v_n := coalesce(cardinality(p_payloads), 0);
  IF v_n = 0 THEN
    RETURN '{}';
  END IF;
  -- array_position would refuse a multidimensional array with its own error (0A000); keys in
  -- one would be paired with the payloads as if flattened.
  IF array_ndims(p_payloads) <> 1 OR coalesce(array_ndims(p_idempotency_keys), 1) <> 1 THEN
    PERFORM pgqueue.require_valid(array_ndims(p_payloads) = 1,
                                  'payloads must be a one-dimensional array');
    PERFORM pgqueue.require_valid(coalesce(array_ndims(p_idempotency_keys), 1) = 1,
                                  'idempotency keys must be a one-dimensional array');
  END IF;
  PERFORM pgqueue.require_valid(array_position(p_payloads, NULL) IS NULL,
                                'payloads must not contain NULL');
  PERFORM pgqueue.require_valid(
    p_idempotency_keys IS NULL OR cardinality(p_idempotency_keys) = v_n,
    format('%s idempotency keys for %s payloads', cardinality(p_idempotency_keys), v_n));
  -- Ids are drawn first so each input position knows its id without relying on RETURNING order.
  v_ids := ARRAY(SELECT nextval('pgqueue.jobs_id_seq') FROM generate_series(1, v_n));
  IF NOT p_wake THEN
    PERFORM set_config('pgqueue.defer_wake', 'on', true);
  END IF;
  IF p_idempotency_keys IS NULL THEN
    -- A plain insert, as in enqueue.
    INSERT INTO pgqueue.jobs (id, queue, payload, priority, run_after, max_attempts)
    SELECT v_ids[t.ord], p_queue, t.payload, p_priority, p_run_after, p_max_attempts
      FROM unnest(p_payloads) WITH ORDINALITY AS t(payload, ord)
     ORDER BY t.ord;
  ELSE
    INSERT INTO pgqueue.jobs (id, queue, payload, idempotency_key, priority, run_after,
                              max_attempts)
    SELECT v_ids[t.ord], p_queue, t.payload, t.key, p_priority, p_run_after, p_max_attempts
      FROM unnest(p_payloads, p_idempotency_keys) WITH ORDINALITY AS t(payload, key, ord)
     ORDER BY t.ord
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
  END IF;
  IF NOT p_wake THEN
    PERFORM set_config('pgqueue.defer_wake', 'off', true);
  END IF;
  IF p_idempotency_keys IS NOT NULL THEN
    IF p_wake THEN
      PERFORM pgqueue.notify_queue(p_queue);
    END IF;
    -- A keyed position gets the id of whichever job holds its key (ours or an earlier one).
    v_ids := ARRAY(
      SELECT CASE WHEN t.key IS NULL THEN v_ids[t.ord]
                  ELSE (SELECT j.id FROM pgqueue.jobs j
                         WHERE j.queue = p_queue AND j.idempotency_key = t.key) END
        FROM unnest(p_idempotency_keys) WITH ORDINALITY AS t(key, ord)
       ORDER BY t.ord);
    IF array_position(v_ids, NULL) IS NOT NULL THEN
      RAISE EXCEPTION 'pgqueue: a job holding one of the idempotency keys was deleted concurrently'
        USING ERRCODE = 'serialization_failure', HINT = 'Retry the call.';
    END IF;
  END IF;
  RETURN v_ids;
END
$$;

-- ── claim floors (pgqueue.ready_floor) ────────────────────────────────────────────────────
-- The rule that keeps every ready job at or above where claims start: whoever makes a job ready
-- holds the queue's floor lock in shared mode from then until its transaction ends, and, when
-- the job is below the queue's floor (or its priority has none), notes it in
-- pgqueue.ready_floor_below. A floor moves up only under the same lock in exclusive mode (not
-- waiting for it: the move is skipped while any such transaction is open, and a later claim
-- tries again), to what a snapshot taken under the lock sees, and never above the time of the
-- move. So no job is passed: one whose transaction was open during a move is noted below when
-- it is written after it; one written before it is seen by it. The lock is an advisory lock in
-- the two-int space (1885434739 = 'pgqs', and the queue's hash), apart from applications'
-- one-bigint advisory locks; two queues sharing a hash only share the lock.

-- Admits a job made ready at (p_run_after, p_id) in claim order, after its row was written:
-- notes it below when it is below its floor (the insert trigger does the same inline). Usually
-- one index probe and no write. In REPEATABLE READ or SERIALIZABLE the snapshot may predate a
-- move, so there a job is noted unless it is due no earlier than now (a move never puts a
-- floor above its own time).
CREATE OR REPLACE FUNCTION pgqueue.floor_admit(
  p_queue text, p_priority int, p_run_after timestamptz, p_id bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_above boolean;
BEGIN
  PERFORM pg_advisory_xact_lock_shared(1885434739, hashtext(p_queue));
  -- In READ COMMITTED this statement's snapshot is taken after the lock: any move is in it.
  SELECT (p_run_after, p_id) >= (f.run_after, f.id) INTO v_above
    FROM pgqueue.ready_floor f
   WHERE f.queue = p_queue AND f.priority = p_priority;
  IF v_above AND (current_setting('transaction_isolation') = 'read committed'
                  OR p_run_after >= clock_timestamp()) THEN
    RETURN;
  END IF;
  INSERT INTO pgqueue.ready_floor_below (queue, priority, run_after, id)
  VALUES (p_queue, p_priority, p_run_after, p_id);
END
$$;

-- Where claims of p_queue start, per priority (highest first): the lower of the floor and the
-- jobs noted below it. Plain SQL without SECURITY DEFINER or SET clauses (its callers run as
-- the owner with a pinned search_path, and no role may call it) so that the planner inlines it
-- into the caller's query: as a separate call it cost each claim about 10 us, 5% of a claim.
CREATE OR REPLACE FUNCTION pgqueue.floor_starts(p_queue text)
RETURNS TABLE (priority int, run_after timestamptz, id bigint)
LANGUAGE sql STABLE
AS $$
  SELECT DISTINCT ON (x.priority) x.priority, x.run_after, x.id
    FROM (SELECT f.priority, f.run_after, f.id FROM pgqueue.ready_floor f
           WHERE f.queue = p_queue
          UNION ALL
          SELECT b.priority, b.run_after, b.id FROM pgqueue.ready_floor_below b
           WHERE b.queue = p_queue) x
   ORDER BY x.priority DESC, x.run_after, x.id
$$;

-- Moves each floor of p_queue up to its first ready job, or to the current time when that is
-- later (or there is none), and folds in the jobs noted below; does nothing when a transaction
-- that makes jobs of the queue ready is open (a later claim tries again). It reads the dead
-- entries between the old floor and the first ready job once, so that claims do not. Holds the
-- floor lock until the caller's transaction ends, which holds back the queue's enqueues until
-- then: claims call it only as a statement of its own. Only in READ COMMITTED: an older
-- snapshot could miss a job committed since.
CREATE OR REPLACE FUNCTION pgqueue.floor_advance(p_queue text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_start record;
  v_bound timestamptz;
  v_run_after timestamptz;
  v_id bigint;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed'
     OR NOT pg_try_advisory_xact_lock(1885434739, hashtext(p_queue)) THEN
    RETURN;
  END IF;
  v_bound := clock_timestamp();
  FOR v_start IN SELECT * FROM pgqueue.floor_starts(p_queue) LOOP
    SELECT j.run_after, j.id INTO v_run_after, v_id
      FROM pgqueue.jobs j
     WHERE j.queue = p_queue AND j.state = 'ready' AND j.priority = v_start.priority
       AND (j.run_after, j.id) >= (v_start.run_after, v_start.id)
     ORDER BY j.run_after, j.id
     LIMIT 1;
    IF v_id IS NULL OR (v_run_after, v_id) > (v_bound, 0::bigint) THEN
      v_run_after := v_bound;
      v_id := 0;
    END IF;
    INSERT INTO pgqueue.ready_floor AS f (queue, priority, run_after, id, moved_at)
    VALUES (p_queue, v_start.priority, v_run_after, v_id, now())
    ON CONFLICT (queue, priority) DO UPDATE
      SET run_after = EXCLUDED.run_after, id = EXCLUDED.id, moved_at = EXCLUDED.moved_at;
  END LOOP;
  DELETE FROM pgqueue.ready_floor_below b WHERE b.queue = p_queue;
END
$$;

-- ── claim ─────────────────────────────────────────────────────────────────────────────────

-- The distinct priorities of a queue's ready jobs, highest first, each with its earliest
-- run_after: one index probe per priority, from the priority's floor.
CREATE OR REPLACE FUNCTION pgqueue.ready_priorities(p_queue text)
RETURNS TABLE (priority int, first_run_after timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
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

-- Takes back expired leases (janitor_reset_stale_claims) when maintenance is due: at most once
-- per pgqueue.maintenance.janitor_every across the database, by whichever claim gets there
-- first. Claims call it, so expired leases come back whatever the fleet claims with; each
-- session at most once a second (claim_batch checks the session setting
-- pgqueue.maintenance_checked_at, which this sets), since a call and a read of the one-row
-- table per claim cost busy workers 5-15% of their claims. Returns how many jobs it changed.
-- Paced by its cost: the next run is due no sooner than 50 times this run's duration, so it
-- takes at most about 2% of one backend. That matters while a long transaction holds the
-- horizon: the janitor then reads every claimed-job version left since (85 ms per run after
-- 2 minutes at 5,000 jobs/s), and a claim that runs it waits for it.
CREATE OR REPLACE FUNCTION pgqueue.maintain_if_due()
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_started timestamptz;
  v_changed int;
BEGIN
  PERFORM set_config('pgqueue.maintenance_checked_at', extract(epoch FROM now())::text, false);
  IF (SELECT m.janitor_due_at FROM pgqueue.maintenance m) > now()
     OR NOT pg_try_advisory_xact_lock(8100266002545501543) THEN
    RETURN 0;
  END IF;
  -- Under the lock, the row says whether another transaction did it meanwhile.
  UPDATE pgqueue.maintenance m SET janitor_due_at = now() + m.janitor_every
   WHERE m.janitor_due_at <= now();
  IF NOT FOUND THEN
    RETURN 0;
  END IF;
  v_started := clock_timestamp();
  v_changed := pgqueue.janitor_reset_stale_claims();
  UPDATE pgqueue.maintenance m
     SET janitor_due_at = now() + (clock_timestamp() - v_started) * 50
   WHERE m.janitor_due_at < now() + (clock_timestamp() - v_started) * 50;
  RETURN v_changed;
END
$$;

-- Claims up to p_limit due jobs of a queue for p_worker_id: highest priority first, then the
-- job due longest, then the lowest id. SKIP LOCKED lets concurrent claimers take different
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
  lease_token bigint
)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  v_floor record;
  v_left int := p_limit;
  v_got int;
BEGIN
  IF p_queue IS NULL OR p_worker_id IS NULL OR p_limit IS NULL OR p_lease_for IS NULL
     OR p_limit NOT BETWEEN 1 AND 10000 OR p_lease_for <= interval '0'
     OR octet_length(p_queue) NOT BETWEEN 1 AND 255 OR p_queue ~ '[[:cntrl:]]' THEN
    PERFORM pgqueue.check_queue_name(p_queue);
    PERFORM pgqueue.require(p_worker_id, 'worker_id');
    PERFORM pgqueue.require(p_limit, 'limit');
    PERFORM pgqueue.require(p_lease_for, 'lease_for');
    PERFORM pgqueue.require_valid(p_limit BETWEEN 1 AND 10000, 'limit must be between 1 and 10000');
    PERFORM pgqueue.require_valid(p_lease_for > interval '0', 'lease_for must be positive');
  END IF;
  IF extract(epoch FROM now()) >= coalesce(nullif(current_setting(
       'pgqueue.maintenance_checked_at', true), ''), '0')::float8 + 1 THEN
    PERFORM pgqueue.maintain_if_due();
  END IF;
  -- A move holds the queue's enqueues back until this transaction ends: only when the claim
  -- is most likely a transaction of its own (it began with this statement, within 5 ms: the
  -- extended protocol starts it at Parse), not a statement in a longer one.
  IF statement_timestamp() - transaction_timestamp() < interval '5 milliseconds'
     AND EXISTS (SELECT FROM pgqueue.ready_floor f
                  WHERE f.queue = p_queue AND f.moved_at < now() - interval '1 second'
                 UNION ALL
                 SELECT FROM pgqueue.ready_floor_below b WHERE b.queue = p_queue) THEN
    PERFORM pgqueue.floor_advance(p_queue);
  END IF;
  -- One priority at a time, highest first, each from its floor: within a priority the index is
  -- in run_after order, so the scan stops at the first job not yet due instead of reading past
  -- every scheduled job (a backlog of future jobs would otherwise make each claim read all of
  -- them), and starts past the dead entries below the floor.
  FOR v_floor IN
    SELECT f.priority, f.run_after, f.id FROM pgqueue.floor_starts(p_queue) f
     WHERE f.run_after <= now()
     ORDER BY f.priority DESC
  LOOP
    RETURN QUERY
    WITH next_jobs AS (
      SELECT j.id
        FROM pgqueue.jobs j
       WHERE j.queue = p_queue
         AND j.state = 'ready'
         AND j.priority = v_floor.priority
         AND (j.run_after, j.id) >= (v_floor.run_after, v_floor.id)
         AND j.run_after <= now()
         AND j.attempts < j.max_attempts
       ORDER BY j.run_after, j.id
       LIMIT v_left
         FOR UPDATE SKIP LOCKED
    ), claimed AS (
      UPDATE pgqueue.jobs j
         SET state = 'claimed',
             claimed_by = p_worker_id,
             claimed_at = now(),
             lease_until = now() + p_lease_for,
             attempts = j.attempts + 1,
             lease_token = CASE WHEN j.lease_token < 0 THEN greatest(j.attempts, j.max_attempts)
                                ELSE greatest(j.lease_token, j.attempts) END + 1,
             updated_at = now()
       WHERE j.id = ANY (ARRAY(SELECT n.id FROM next_jobs n))
      RETURNING j.id, j.queue, j.payload, j.priority, j.attempts, j.max_attempts, j.claimed_at,
                j.lease_until, j.lease_token
    )
    SELECT c.* FROM claimed c ORDER BY c.id;
    GET DIAGNOSTICS v_got = ROW_COUNT;
    v_left := v_left - v_got;
    EXIT WHEN v_left = 0;
  END LOOP;
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
  RETURN QUERY SELECT * FROM pgqueue.claim_batch(p_queue, p_worker_id, 1, p_lease_for);
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
  RETURN (SELECT min(p.first_run_after) FROM pgqueue.ready_priorities(p_queue) p);
END
$$;

-- What an idle claimer should wait for, after a claim found nothing: `due_now` says a ready job
-- is already due (so it is row-locked by another transaction, or out of attempts: re-check
-- with a back-off, not at once), `next_due` is when the next job not yet due becomes due
-- (NULL when none). One index probe or two per priority, however many jobs wait.
CREATE OR REPLACE FUNCTION pgqueue.wait_hint(p_queue text)
RETURNS TABLE (due_now boolean, next_due timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
BEGIN
  RETURN QUERY
  SELECT coalesce(bool_or(p.first_run_after <= now()), false),
         min((SELECT j.run_after FROM pgqueue.jobs j
               WHERE j.queue = p_queue AND j.state = 'ready' AND j.priority = p.priority
                 AND j.run_after > now() AND j.run_after < 'infinity'
                 AND j.attempts < j.max_attempts
               ORDER BY j.run_after LIMIT 1))
    FROM pgqueue.ready_priorities(p_queue) p;
END
$$;

-- ── lease operations (fenced: only the current holder of the current claim may act) ───────
-- They find their jobs by id, and write `(j.state = 'claimed') IS TRUE` rather than
-- `j.state = 'claimed'` so that the planner cannot answer them from the partial index of
-- claimed jobs instead of the primary key: its statistics usually say that index is nearly
-- empty, and it then reads every claimed job, and every dead entry claimed jobs left behind a
-- long transaction (an ack of 100 jobs took 30 ms after a minute of that at 5,000 jobs/s).

-- Extends the lease of a job the caller holds. False when the lease is lost (the job is no
-- longer claimed by this worker under this claim). p_lease_token (from the claim) fences
-- against a later claim of the same job by the same worker id; NULL skips that check (the
-- seed's callers).
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
   WHERE j.id = p_job_id
     AND (j.state = 'claimed') IS TRUE
     AND j.claimed_by = p_worker_id
     AND (p_lease_token IS NULL OR j.lease_token = p_lease_token);
  RETURN FOUND;
END
$$;

-- Adds acknowledged jobs to the per-queue done counters (one row per queue and slot).
CREATE OR REPLACE FUNCTION pgqueue.count_done(p_queues text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  INSERT INTO pgqueue.done_counts AS c (queue, slot, n)
  SELECT u.q, pg_backend_pid() % 32, count(*) FROM unnest(p_queues) AS u(q) GROUP BY u.q
  ON CONFLICT (queue, slot) DO UPDATE SET n = c.n + EXCLUDED.n;
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
  RETURNING j.queue INTO v_queue;
  IF v_queue IS NULL THEN
    RETURN false;
  END IF;
  PERFORM pgqueue.count_done(ARRAY[v_queue]);
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
  SELECT coalesce(array_agg(a.id ORDER BY a.id), '{}'), array_agg(a.queue) INTO v_ids, v_queues
    FROM acked a;
  IF cardinality(v_ids) > 0 THEN
    PERFORM pgqueue.count_done(v_queues);
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
  IF p_queue <> '' THEN
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
  IF v_job.attempts >= v_job.max_attempts THEN
    UPDATE pgqueue.jobs j
       SET state = 'dead', last_error = pgqueue.bounded_error(p_error), finished_at = now(),
           updated_at = now(), lease_until = NULL
     WHERE j.id = p_job_id;
    RETURN 'dead';
  END IF;
  v_delay := coalesce(p_requeue_after, pgqueue.retry_delay(v_job.queue, v_job.attempts));
  UPDATE pgqueue.jobs j
     SET state = 'ready', run_after = now() + v_delay, last_error = pgqueue.bounded_error(p_error),
         claimed_by = NULL, claimed_at = NULL, lease_until = NULL, updated_at = now()
   WHERE j.id = p_job_id;
  PERFORM pgqueue.floor_admit(v_job.queue, v_job.priority, now() + v_delay, p_job_id);
  -- Also when the retry is due later: an idle claimer then learns its due time (wait_hint).
  PERFORM pgqueue.notify_queue(v_job.queue);
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

-- ── maintenance ───────────────────────────────────────────────────────────────────────────

-- Takes back jobs whose lease expired more than p_grace ago: ready again (woken at once), or
-- 'dead' when the expired attempt was the last one, so a job that kills its worker cannot run
-- without bound. Ready jobs that already used all attempts (left by the seed's janitor) are
-- ended 'dead' too. Returns how many jobs it changed. Safe to run often and from many places.
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
             last_error = pgqueue.bounded_error(format(
               'lease expired on attempt %s of %s (worker %s, lease until %s)%s',
               j.attempts, j.max_attempts, j.claimed_by, j.lease_until,
               CASE WHEN j.attempts >= j.max_attempts THEN ': no attempts left' ELSE '' END)),
             claimed_by = NULL, claimed_at = NULL, lease_until = NULL, updated_at = now()
       WHERE j.id = ANY (ARRAY(SELECT t.id FROM stale t))
      RETURNING j.queue, j.state, j.priority, j.run_after, j.id
    )
    SELECT r.* FROM reset r
  LOOP
    v_count := v_count + 1;
    IF v_reset.state = 'ready' THEN
      PERFORM pgqueue.floor_admit(v_reset.queue, v_reset.priority, v_reset.run_after, v_reset.id);
      PERFORM pgqueue.notify_queue(v_reset.queue);  -- folds: one per queue
    END IF;
  END LOOP;

  WITH exhausted AS (
    UPDATE pgqueue.jobs j
       SET state = 'dead', finished_at = now(), updated_at = now(),
           last_error = pgqueue.bounded_error(format(
             'no attempts left (%s of %s used) when found ready', j.attempts, j.max_attempts))
     WHERE j.id = ANY (ARRAY(SELECT r.id FROM pgqueue.jobs r
                              WHERE r.state = 'ready' AND r.attempts >= r.max_attempts
                              LIMIT 10000  -- bounded; also keeps the plan on the small index
                                FOR UPDATE SKIP LOCKED))
    RETURNING 1
  )
  SELECT count(*) INTO v_exhausted FROM exhausted;
  RETURN v_count + v_exhausted;
END
$$;

-- Cancels a job that has not started (ready): it ends 'cancelled'. False when the job is not
-- ready (running, finished or missing).
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
   WHERE j.id = p_job_id AND (j.state = 'ready') IS TRUE;
  RETURN FOUND;
END
$$;

-- Puts dead jobs of a queue back to ready with a fresh set of attempts: all of them, or only
-- p_job_ids. Returns how many; wakes the queue's listeners.
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
BEGIN
  PERFORM pgqueue.check_queue_name(p_queue);
  FOR v_first IN
    WITH retried AS (
      UPDATE pgqueue.jobs j
         SET state = 'ready', attempts = 0, run_after = now(), finished_at = NULL,
             updated_at = now()
       WHERE j.queue = p_queue AND j.state = 'dead'
         AND (p_job_ids IS NULL OR j.id = ANY (p_job_ids))
      RETURNING j.priority, j.run_after, j.id
    )
    SELECT DISTINCT ON (r.priority) r.priority, r.run_after, r.id, count(*) OVER () AS n
      FROM retried r
     ORDER BY r.priority, r.run_after, r.id
  LOOP
    v_count := v_first.n;
    PERFORM pgqueue.floor_admit(p_queue, v_first.priority, v_first.run_after, v_first.id);
  END LOOP;
  IF v_count > 0 THEN
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
                     LIMIT p_batch_size
                       FOR UPDATE SKIP LOCKED)
    RETURNING j.queue, j.state
  ), counted AS (
    -- Deleted done jobs leave the counters (as a negative delta in slot 0).
    INSERT INTO pgqueue.done_counts (queue, slot, n)
    SELECT g.queue, 0, -count(*) FROM gone g WHERE g.state = 'done' GROUP BY g.queue
    ON CONFLICT (queue, slot) DO UPDATE SET n = pgqueue.done_counts.n + EXCLUDED.n
  )
  SELECT count(*)::int INTO done_deleted FROM gone;

  WITH gone AS (
    DELETE FROM pgqueue.jobs j
     WHERE j.id IN (SELECT f.id FROM pgqueue.jobs f
                     WHERE f.state = 'dead' AND f.finished_at < now() - p_retain_dead
                     LIMIT p_batch_size
                       FOR UPDATE SKIP LOCKED)
    RETURNING 1
  )
  SELECT count(*)::int INTO dead_deleted FROM gone;

  -- Fold the counter shards of queues with nothing left so the table stays small. The shards
  -- are locked and summed again first: a count_done committing meanwhile changes a shard, and
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

-- ── observability ─────────────────────────────────────────────────────────────────────────

-- Jobs per queue and state, cheap with millions of completed jobs retained: live states are
-- counted through their partial indexes, done jobs come from the done counters (so `oldest`
-- and `newest_update` are NULL for them). `lag` is how long the oldest due ready job has
-- waited (the queue's lag); NULL for other states.
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

-- ── privileges ────────────────────────────────────────────────────────────────────────────
-- Least privilege: the tables stay private to the schema's owner, and calling a function is the
-- whole capability. Every pgqueue function runs as its owner (SECURITY DEFINER; each pins its
-- search_path, so a caller's objects cannot stand in for built-ins; floor_starts, which only
-- pgqueue's own functions call, is inlined into theirs instead), nobody but the owner may
-- execute one until granted, and pgqueue.grant_producer / grant_worker hand out the two roles'
-- sets. Applied last on every run: CREATE OR REPLACE resets SECURITY DEFINER, and a function
-- created by this run starts with EXECUTE for PUBLIC.
-- Grants EXECUTE on every pgqueue function named in p_functions (all overloads) and USAGE on
-- the schema. Internal to the two helpers below.
CREATE OR REPLACE FUNCTION pgqueue.grant_functions(p_role regrole, p_functions text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_fn regprocedure;
BEGIN
  PERFORM pgqueue.require(p_role, 'role');
  EXECUTE format('GRANT USAGE ON SCHEMA pgqueue TO %s', p_role);
  FOR v_fn IN
    SELECT p.oid::regprocedure FROM pg_proc p
     WHERE p.pronamespace = 'pgqueue'::regnamespace AND p.proname = ANY (p_functions)
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', v_fn, p_role);
  END LOOP;
END
$$;

-- Lets an existing role add jobs (enqueue, enqueue_batch, wake) and nothing else: it cannot
-- read or change pgqueue's tables, claim jobs or change the schema. Run by the schema's owner
-- (or a superuser); creating the role itself is the administrator's. Idempotent.
CREATE OR REPLACE FUNCTION pgqueue.grant_producer(p_role regrole)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT pgqueue.grant_functions(p_role,
    ARRAY['enqueue', 'enqueue_batch', 'wake', 'channel', 'check_queue_name'])
$$;

-- Lets an existing role do what a pgqueue::worker does: a producer's rights plus claim,
-- heartbeat, ack, nack, release (and learning their outcome after a lost answer), the janitor
-- and reading pgqueue.depth. Not: cancel,
-- retry_dead, gc, set_retry_backoff (administration), nor the tables. Idempotent.
CREATE OR REPLACE FUNCTION pgqueue.grant_worker(p_role regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pgqueue.grant_producer(p_role);
  PERFORM pgqueue.grant_functions(p_role,
    ARRAY['claim_batch', 'claim_next', 'next_run_after', 'wait_hint', 'heartbeat', 'ack',
          'ack_batch', 'nack', 'release', 'count_acked', 'lease_outcome',
          'janitor_reset_stale_claims']);
  EXECUTE format('GRANT SELECT ON pgqueue.depth TO %s', p_role);
END
$$;

-- Takes back everything the two helpers (or anyone) granted on pgqueue to a role, e.g. before
-- DROP ROLE. Idempotent.
CREATE OR REPLACE FUNCTION pgqueue.revoke_access(p_role regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pgqueue.require(p_role, 'role');
  EXECUTE format('REVOKE ALL ON ALL ROUTINES IN SCHEMA pgqueue FROM %s', p_role);
  EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA pgqueue FROM %s', p_role);
  EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgqueue FROM %s', p_role);
  EXECUTE format('REVOKE ALL ON SCHEMA pgqueue FROM %s', p_role);
END
$$;

DO $$
DECLARE
  v_fn regprocedure;
BEGIN
  FOR v_fn IN
    SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
     WHERE p.pronamespace = 'pgqueue'::regnamespace AND p.prokind = 'f'
       -- The grant helpers run as their caller: only who may grant may use them.
       AND p.proname NOT IN ('grant_functions', 'grant_producer', 'grant_worker',
                              'revoke_access',
                              -- inlined into their callers (see there)
                              'floor_starts', 'channel')
  LOOP
    EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER', v_fn);
  END LOOP;
  FOR v_fn IN
    SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
     WHERE p.pronamespace = 'pgqueue'::regnamespace
  LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON ROUTINE %s FROM PUBLIC', v_fn);
  END LOOP;
END
$$;
REVOKE ALL ON SCHEMA pgqueue FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA pgqueue FROM PUBLIC;

-- Grants held before this run come back on functions dropped and created again, and roles that
-- had the worker's or the producer's set get the functions this version added to it.
DO $$
DECLARE
  v_grant record;
BEGIN
  FOR v_grant IN SELECT DISTINCT g.proname, g.grantee FROM pgqueue_migration_grants g
                  WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid = g.grantee) LOOP
    PERFORM pgqueue.grant_functions(v_grant.grantee::regrole, ARRAY[v_grant.proname::text]);
  END LOOP;
  FOR v_grant IN SELECT DISTINCT g.grantee FROM pgqueue_migration_grants g
                  WHERE g.proname = 'claim_batch'
                    AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid = g.grantee) LOOP
    PERFORM pgqueue.grant_worker(v_grant.grantee::regrole);
  END LOOP;
  FOR v_grant IN SELECT DISTINCT g.grantee FROM pgqueue_migration_grants g
                  WHERE g.proname = 'enqueue'
                    AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid = g.grantee) LOOP
    PERFORM pgqueue.grant_producer(v_grant.grantee::regrole);
  END LOOP;
END
$$;

-- ── version ───────────────────────────────────────────────────────────────────────────────
INSERT INTO pgqueue.schema_version (singleton, version) VALUES (true, 4)
ON CONFLICT (singleton) DO UPDATE SET version = 4, installed_at = now()
  WHERE pgqueue.schema_version.version < 4;

COMMIT;
