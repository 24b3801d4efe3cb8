-- Format /2 storage (docs/transfer.md, "Storage at the edge"). Chunks are
-- kept as they were sent (zstd frames as they are); a packet pushed as /2
-- is found from its root, kept in its row; the findings of a packet's
-- bodies are kept with it, so a push building on it need not read them
-- again; bodies of several chunks keep their end state, so a body that grew
-- is hashed and screened from where it ended. Packets stored before keep
-- every read working (whole: their object; chunked: their manifest and
-- layout objects).

-- A chunk's raw size stays `size`; how it is stored. Rows written before
-- hold chunks stored as they are.
ALTER TABLE chunks ADD COLUMN stored_size INTEGER;                     -- NULL: size (stored as it is)
ALTER TABLE chunks ADD COLUMN encoding INTEGER NOT NULL DEFAULT 0;     -- 0 identity, 1 zstd

-- storage = 'packed': the root (its pack table, its manifest's chunks,
-- its layout's chunks). findings: what its bodies hold (JSON, NULL when
-- nothing), kept since this migration (findings_kept = 1); packets stored
-- before have their bodies screened when a push reuses them.
ALTER TABLE packets ADD COLUMN root BLOB;
ALTER TABLE packets ADD COLUMN findings TEXT;
ALTER TABLE packets ADD COLUMN findings_kept INTEGER NOT NULL DEFAULT 0;

-- The end state of a body of several chunks: its SHA-256 state after all
-- of its bytes and, per scan class, its scanner's snapshot.
CREATE TABLE body_ends (
  sha256 TEXT NOT NULL,                    -- <hex>
  size INTEGER NOT NULL,
  class INTEGER NOT NULL,                  -- packet-core's scan_class
  hash_state BLOB NOT NULL,
  scan BLOB NOT NULL,
  PRIMARY KEY (sha256, size, class)
) WITHOUT ROWID;
