-- A push belongs to the token that created it (docs/transfer.md, "Whose
-- push"): its id in PILLBOX_TOKENS (`PILLBOX_TOKEN` for the single token).
-- Another token's requests for it are answered as for a push that does not
-- exist. Pushes created before this migration have no owner and stay open
-- to any token that may push, until they complete or expire.
ALTER TABLE pushes ADD COLUMN owner TEXT;
