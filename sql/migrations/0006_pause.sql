-- Paused queues: they keep accepting jobs but hand none out until resumed (pgqueue.pause,
-- pgqueue.resume). One row per paused queue; most databases have none, and a claim's look is
-- then one probe of an empty index.
CREATE TABLE IF NOT EXISTS pgqueue.paused_queues (
  queue text PRIMARY KEY,
  paused_at timestamptz NOT NULL DEFAULT now(),
  paused_by text NOT NULL  -- the session's role, for whoever wonders who paused it
);
