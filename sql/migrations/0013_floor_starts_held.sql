-- pgqueue.floor_starts also returns whether the queue's floors are held (paused or limited),
-- so that the claim's first pass reads the floor rows once instead of a second time for that
-- (a subquery of its own: about 20,000 of a one-job claim's 790,000 instructions). Its result
-- columns change, which CREATE OR REPLACE cannot do; definitions/ creates it again. Nothing
-- depends on it in the catalog (its callers are PL/pgSQL functions).
DROP FUNCTION IF EXISTS pgqueue.floor_starts(text);
