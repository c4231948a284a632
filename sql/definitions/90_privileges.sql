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

-- Lets an existing role add jobs (enqueue, enqueue_batch, wake, schedule, unschedule) and nothing else: it cannot
-- read or change pgqueue's tables, claim jobs or change the schema. Run by the schema's owner
-- (or a superuser); creating the role itself is the administrator's. Idempotent.
CREATE OR REPLACE FUNCTION pgqueue.grant_producer(p_role regrole)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT pgqueue.grant_functions(p_role,
    ARRAY['enqueue', 'enqueue_batch', 'wake', 'channel', 'check_queue_name', 'schedule',
          'unschedule', 'cron_next'])
$$;

-- Lets an existing role do what a pgqueue::worker does: a producer's rights plus claim,
-- heartbeat, ack, nack, release (and learning their outcome after a lost answer), the janitor
-- and reading pgqueue.depth, queue_summary and limits. Not: cancel,
-- retry_dead, gc, set_retry_backoff, set_queue_limits (administration), nor the tables. Idempotent.
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
          'janitor_reset_stale_claims', 'queue_summary', 'limits']);
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
                              'floor_starts', 'channel', 'tokens_at', 'counter_slot')
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
