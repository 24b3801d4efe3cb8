-- The packets each ref has named (docs/worker.md, "Ref history"): one row
-- per creation or move, written in the same batch (one transaction) as the
-- change to `refs`, so the two never disagree. The last 100 rows of a ref
-- are kept (older ones are dropped as a move is recorded); a ref's rows go
-- with it when it is deleted.
CREATE TABLE ref_history (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,   -- order of the moves; history cursors
  name TEXT NOT NULL,                      -- the ref
  digest TEXT NOT NULL,                    -- the packet it named from `at` on
  at TEXT NOT NULL,                        -- RFC 3339, UTC
  token_id TEXT                            -- the id of the token that moved it (never a token); NULL: unknown
);
CREATE INDEX ref_history_name ON ref_history (name, seq);

-- Refs made before: their current packet is the first row, by no known token.
INSERT INTO ref_history (name, digest, at, token_id) SELECT name, digest, updated, NULL FROM refs ORDER BY updated, name;
