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
-- The functions that read the claim floors (pgqueue.floor_starts) also run with
-- enable_bitmapscan = off: the planner reads the two small floor tables with bitmap scans,
-- whose set-up cost a one-job claim 10 us of its 93 (a plain index scan reads the same rows).

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
