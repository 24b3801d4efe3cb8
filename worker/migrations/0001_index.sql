-- The index of verified packets. R2 holds the bytes (packets/sha256/<hex>);
-- a packet appears here only after packet-core verified it.

CREATE TABLE packets (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,   -- insertion order; list cursors
  digest TEXT NOT NULL UNIQUE,             -- sha256:<hex>
  size INTEGER NOT NULL,                   -- bytes
  member_count INTEGER NOT NULL,           -- members after packet.json
  file_bytes INTEGER NOT NULL,             -- sum of file sizes
  harness_kind TEXT,                       -- codex | claude | NULL
  thread_id TEXT,                          -- harness thread/session id
  model TEXT,                              -- harness model, if recorded
  manifest_offset INTEGER NOT NULL,        -- packet.json's bytes in the object
  manifest_size INTEGER NOT NULL,
  created TEXT NOT NULL                    -- RFC 3339, UTC
);
CREATE INDEX packets_thread ON packets (thread_id, seq);
CREATE INDEX packets_harness ON packets (harness_kind, seq);

CREATE TABLE labels (
  digest TEXT NOT NULL,
  label TEXT NOT NULL,
  PRIMARY KEY (label, digest)
);
CREATE INDEX labels_digest ON labels (digest);

CREATE TABLE members (
  id INTEGER PRIMARY KEY,                  -- search cursors
  digest TEXT NOT NULL,
  idx INTEGER NOT NULL,                    -- position in the manifest
  path TEXT NOT NULL,
  type TEXT NOT NULL,                      -- file | dir | symlink
  mode INTEGER NOT NULL,
  size INTEGER NOT NULL,
  sha256 TEXT,                             -- <hex>, files only
  target TEXT,                             -- symlinks only
  data_offset INTEGER NOT NULL,            -- first body byte in the packet
  UNIQUE (digest, idx)
);
CREATE INDEX members_lookup ON members (digest, path);
CREATE INDEX members_path ON members (path);
CREATE INDEX members_sha256 ON members (sha256);

CREATE TABLE refs (
  name TEXT PRIMARY KEY,                   -- e.g. sessions/<name>/latest
  digest TEXT NOT NULL,
  updated TEXT NOT NULL
);
CREATE INDEX refs_digest ON refs (digest);

-- Multipart uploads in progress (R2 multipart upload into uploads/<id>).
CREATE TABLE uploads (
  id TEXT PRIMARY KEY,                     -- 32 lowercase hex digits
  digest TEXT NOT NULL,
  size INTEGER NOT NULL,
  part_size INTEGER NOT NULL,
  r2_upload_id TEXT NOT NULL,
  labels TEXT NOT NULL,                    -- JSON array
  created TEXT NOT NULL
);

CREATE TABLE upload_parts (
  upload_id TEXT NOT NULL,
  number INTEGER NOT NULL,
  etag TEXT NOT NULL,
  size INTEGER NOT NULL,
  PRIMARY KEY (upload_id, number)
);
