-- Content-addressed storage (docs/transfer.md, "Storage at the edge").
-- R2 now holds packs (chunks back to back), chunked packets' manifests and
-- layouts, and whole packets as before; D1 holds one row per unique chunk
-- and a few rows per packet. Existing packets stay where they are
-- (packets/sha256/<hex>, stored whole) and keep answering every read the
-- same: their manifests are read from their objects, so the per-member
-- index goes.

-- One row per unique chunk: where one copy of it lies. A hint for
-- deduplicating uploads from any session; layouts hold the authoritative
-- locations.
CREATE TABLE chunks (
  sha256 TEXT PRIMARY KEY,                 -- <hex>
  pack TEXT NOT NULL,                      -- its pack's R2 key
  offset INTEGER NOT NULL,
  size INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX chunks_pack ON chunks (pack);

-- Every R2 object that holds bodies: packs (packs/<id>) and whole packets
-- (packets/sha256/<hex>, uploads/<id>). A row exists before its object is
-- written; the clean-up deletes the row, then the object.
CREATE TABLE packs (
  key TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  chunks INTEGER NOT NULL,                 -- chunks it holds (0 for a whole packet)
  packet TEXT NOT NULL,                    -- the digest of the packet it was written for
  created TEXT NOT NULL,                   -- RFC 3339, UTC
  unused_check INTEGER NOT NULL DEFAULT 1  -- 1: the clean-up checks whether anything still uses it
);
CREATE INDEX packs_packet ON packs (packet);
CREATE INDEX packs_unused ON packs (unused_check, created);

-- Who uses each pack: a stored packet (its digest) or an open push
-- (push:<id>). A pack no one uses, older than the upload TTL, is deleted.
CREATE TABLE pack_users (
  pack TEXT NOT NULL,
  owner TEXT NOT NULL,
  PRIMARY KEY (pack, owner)
) WITHOUT ROWID;
CREATE INDEX pack_users_owner ON pack_users (owner);

ALTER TABLE packets ADD COLUMN storage TEXT NOT NULL DEFAULT 'whole';  -- whole | chunked
ALTER TABLE packets ADD COLUMN object_key TEXT;                         -- whole: the packet's object
ALTER TABLE packets ADD COLUMN layout_key TEXT;                         -- chunked: layouts/sha256/<hex>/<push id>
ALTER TABLE packets ADD COLUMN manifest_key TEXT;                       -- chunked: manifests/sha256/<hex>/<push id>

-- Packets stored before: whole, at their old key, each its own pack.
UPDATE packets SET object_key = 'packets/sha256/' || substr(digest, 8) WHERE object_key IS NULL;
INSERT OR IGNORE INTO packs (key, size, chunks, packet, created, unused_check)
  SELECT object_key, size, 0, digest, created, 0 FROM packets;
INSERT OR IGNORE INTO pack_users (pack, owner) SELECT object_key, digest FROM packets;

-- Delta pushes in progress (R2: pushes/<id>/manifest, pushes/<id>/recipes
-- and a record per part, pushes/<id>/parts/<n>.<attempt>).
CREATE TABLE pushes (
  id TEXT PRIMARY KEY,                     -- 32 lowercase hex digits
  digest TEXT NOT NULL,
  size INTEGER NOT NULL,
  bases TEXT NOT NULL,                     -- JSON array of the bases used
  labels TEXT NOT NULL,                    -- JSON array
  created TEXT NOT NULL
);
CREATE INDEX pushes_created ON pushes (created);

CREATE TABLE push_parts (
  push_id TEXT NOT NULL,
  number INTEGER NOT NULL,
  pack TEXT,                               -- the pack it wrote (NULL: it stored nothing new)
  record TEXT NOT NULL,                    -- its record object: where each frame's chunk lives
  frames INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  stored_bytes INTEGER NOT NULL,
  PRIMARY KEY (push_id, number)
);

-- Members are read from manifests now (GET …/members/{path}, search).
DROP INDEX members_lookup;
DROP INDEX members_path;
DROP INDEX members_sha256;
DROP TABLE members;
