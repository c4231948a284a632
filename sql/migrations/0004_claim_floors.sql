-- Claims start at a per-queue floor, so dead index entries left behind a long transaction are
-- not read; the jobs table is vacuumed by a fixed count of dead rows.

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

-- The floors start at the bottom of each queue and priority that has jobs ready, held or dead,
-- and stay there for a minute (moved_at ahead: claims move a floor only a second after its
-- last move). Version 3's code does not note jobs below a floor: its release, nack, janitor or
-- retry_dead may be waiting behind this upgrade's lock, and runs its old code once through,
-- making a job ready wherever it was. Claims read from the bottom meanwhile, as version 3's
-- did; the first move after the minute finds such jobs. No writer may add a job while this
-- runs: the table is locked against writes until the upgrade commits.
LOCK TABLE pgqueue.jobs IN SHARE MODE;
INSERT INTO pgqueue.ready_floor (queue, priority, run_after, id, moved_at)
SELECT p.queue, p.priority, '-infinity', 0, now() + interval '1 minute'
  FROM (SELECT j.queue, j.priority FROM pgqueue.jobs j WHERE j.state = 'ready'
        UNION
        SELECT j.queue, j.priority FROM pgqueue.jobs j WHERE j.state = 'claimed'
        UNION
        SELECT j.queue, j.priority FROM pgqueue.jobs j WHERE j.state IN ('dead', 'cancelled')) p
ON CONFLICT (queue, priority) DO NOTHING;

-- Vacuum the jobs table by a fixed count of dead rows, not a fifth of the table: with a week of
-- done jobs retained (millions of rows) the default would let millions of dead entries pile up
-- ahead of the ready jobs between runs, and every claim reads past them. Unthrottled, since each
-- run is small. Measured (benchmarks: --only soak, 8,000 jobs/s in and out, gc every 10 s): the
-- table settled 10% smaller and each run left about 100,000 dead rows instead of 500,000; how
-- often runs start stays bounded by the server's autovacuum_naptime (1 minute by default; see
-- docs/operations.md). Only set while the table has no autovacuum settings, so an operator's own
-- stay.
IF NOT EXISTS (SELECT FROM pg_catalog.pg_class c, pg_catalog.unnest(c.reloptions) o
                WHERE c.oid = 'pgqueue.jobs'::regclass AND o LIKE 'autovacuum%') THEN
  ALTER TABLE pgqueue.jobs SET (
    autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 20000,
    autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 20000,
    autovacuum_vacuum_cost_delay = 0);
END IF;
