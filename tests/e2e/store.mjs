// Every query the end-to-end tests make of the Worker's D1 (its schema:
// worker/migrations/*.sql), in one place. Each function takes the store to
// ask, anything with `d1(sql)` answering D1's rows (startEdge's answer),
// and the values it is about: digests, ids, R2 keys, ref names. A value is
// checked for its shape and refused when it has another, never
// interpolated as it came. The SQL is built from the templates below
// (`:name` stands for a value, `:name` of a list for all of its values),
// which store.test.mjs checks against the migrations: every table and
// column named here exists there.

/** The shapes of the values a query is about. */
const SHAPES = {
  digest: [/^sha256:[0-9a-f]{64}$/, 'sha256:<64 lowercase hex digits>'],
  id: [/^[0-9a-f]{32}$/, '32 lowercase hex digits (an upload or push id)'],
  key: [/^(packs\/[0-9a-f]{32}|uploads\/[0-9a-f]{32}|packets\/sha256\/[0-9a-f]{64})$/, 'packs/<id>, uploads/<id> or packets/sha256/<hex>'],
  owner: [/^(sha256:[0-9a-f]{64}|push:[0-9a-f]{32})$/, 'a packet digest or push:<id>'],
  ref: [/^(?=.{1,256}$)[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/, 'a ref name (`/`-separated segments of ASCII letters, digits, `.`, `_`, `-`)'],
  refPrefix: [/^(?=.{1,256}$)([A-Za-z0-9._-]+\/)+$/, 'the start of ref names, ending in `/` (e.g. sessions/x/)'],
  name: [/^[a-z_][a-z0-9_]*$/, 'a lowercase SQL name'],
  number: [/^[1-9][0-9]{0,4}$/, 'a part number'],
};

/** `value` as an SQL literal, if it has `shape`; thrown out otherwise. */
function literal(shape, value) {
  const [re, expected] = SHAPES[shape];
  const text = typeof value === 'number' ? String(value) : value;
  if (typeof text !== 'string' || !re.test(text)) {
    throw new Error(`store query: ${JSON.stringify(value)} is not ${expected}; refused rather than put into SQL`);
  }
  return shape === 'number' ? text : `'${text.replaceAll("'", "''")}'`;
}

/**
 * The queries, with the shape of each of their values: `:digest` is a
 * digest, `:keys` a list of keys, and so on (PARAMS).
 */
export const SQL = Object.freeze({
  objectsOf: `SELECT key, (SELECT count(*) FROM pack_users u WHERE u.pack = packs.key) AS users, unused_check
    FROM packs WHERE packet = :digest ORDER BY key`,
  refsOutside: 'SELECT name FROM refs WHERE substr(name, 1, length(:prefix)) != :prefix',
  refCount: 'SELECT count(*) AS n FROM refs WHERE name = :ref',
  refHistory: 'SELECT digest, token_id FROM ref_history WHERE name = :ref ORDER BY seq',
  refHistoryCount: 'SELECT count(*) AS n FROM ref_history WHERE name = :ref',
  packetObject: 'SELECT member_count, object_key FROM packets WHERE digest = :digest',
  packetStorage: 'SELECT storage FROM packets WHERE digest = :digest',
  packetsInOrder: 'SELECT digest, storage, object_key, findings_kept FROM packets ORDER BY seq',
  packetsAmong: 'SELECT digest FROM packets WHERE digest IN (:digests)',
  schemaObjectCount: 'SELECT count(*) AS n FROM sqlite_master WHERE name = :name',
  uploadCounts: `SELECT (SELECT count(*) FROM uploads WHERE id = :id) AS uploads,
    (SELECT count(*) FROM upload_parts WHERE upload_id = :id) AS parts`,
  partPacks: 'SELECT pack FROM push_parts WHERE push_id = :id AND pack IS NOT NULL',
  partRecord: 'SELECT record FROM push_parts WHERE push_id = :id AND number = :number',
  packsUsedBy: 'SELECT pack FROM pack_users WHERE owner = :owner ORDER BY pack',
  packsOnlyUsedBy: `SELECT pack FROM pack_users u WHERE owner = :owner
    AND NOT EXISTS (SELECT 1 FROM pack_users o WHERE o.pack = u.pack AND o.owner != u.owner)`,
  packsWrittenForAndUsed: `SELECT key, chunks FROM packs WHERE packet = :digest
    AND key IN (SELECT pack FROM pack_users WHERE owner = :digest)`,
  packsAmong: 'SELECT key FROM packs WHERE key IN (:keys)',
  packRows: `SELECT key, unused_check, created, (SELECT group_concat(owner) FROM pack_users u WHERE u.pack = packs.key) AS users
    FROM packs WHERE key IN (:keys)`,
  packsWithoutUsersCount: 'SELECT count(*) AS n FROM packs p WHERE NOT EXISTS (SELECT 1 FROM pack_users u WHERE u.pack = p.key)',
  unmarkedPacksWithoutUsers: `SELECT key FROM packs p WHERE unused_check = 0
    AND NOT EXISTS (SELECT 1 FROM pack_users u WHERE u.pack = p.key)`,
  usesOfMissingPacks: `SELECT DISTINCT u.pack FROM pack_users u WHERE NOT EXISTS (SELECT 1 FROM packs p WHERE p.key = u.pack)
    AND (u.owner NOT LIKE 'push:%' OR EXISTS (SELECT 1 FROM pushes WHERE 'push:' || id = u.owner))`,
  chunkCount: 'SELECT count(*) AS n FROM chunks WHERE pack = :key',
  chunksIn: 'SELECT pack, sha256 FROM chunks WHERE pack IN (:keys)',
  dropUses: 'DELETE FROM pack_users WHERE owner = :owner AND pack IN (:keys)',
  age: `UPDATE packs SET created = '2000-01-01T00:00:00.000Z' WHERE key IN (:keys)`,
  ageAndMark: `UPDATE packs SET created = '2000-01-01T00:00:00.000Z', unused_check = 1 WHERE key IN (:keys)`,
  // Read straight from the state files (state.mjs), no values.
  usedPacks: 'SELECT DISTINCT pack FROM pack_users',
  packKeys: 'SELECT key FROM packs',
});

/** The shape of each `:name` of SQL; a list's is that of its items. */
const PARAMS = {
  digest: 'digest', digests: 'digest', id: 'id', key: 'key', keys: 'key', owner: 'owner',
  ref: 'ref', prefix: 'refPrefix', name: 'name', number: 'number',
};

/** `template` with its values put in, each checked for its shape. */
export function bind(template, values = {}) {
  return template.replace(/:([a-z]+)\b/g, (_, name) => {
    const shape = PARAMS[name];
    if (!shape || !(name in values)) throw new Error(`store query: no value for :${name}`);
    const v = values[name];
    if (Array.isArray(v)) {
      if (v.length === 0) throw new Error(`store query: :${name} is an empty list`);
      return v.map((x) => literal(shape, x)).join(', ');
    }
    return literal(shape, v);
  });
}

const query = (edge, name, values) => edge.d1(bind(SQL[name], values));

// ---- the tables ------------------------------------------------------------

/** Every table of the store. */
export const TABLES = Object.freeze(['packets', 'labels', 'refs', 'ref_history', 'uploads', 'upload_parts', 'chunks',
  'packs', 'pack_users', 'pushes', 'push_parts', 'body_ends']);

/** The column of each table that names the packet a row is about. */
export const ABOUT = Object.freeze({
  packets: 'digest', labels: 'digest', uploads: 'digest', pushes: 'digest', pack_users: 'owner', packs: 'packet',
});

/**
 * Every table and index the store writes, with the columns their bytes are
 * in (storedBytes).
 */
export const STORED = Object.freeze({
  packets: ['digest', 'size', 'member_count', 'file_bytes', 'harness_kind', 'thread_id', 'model', 'manifest_offset',
    'manifest_size', 'created', 'storage', 'object_key', 'layout_key', 'manifest_key', 'root', 'findings', 'findings_kept', 'seq'],
  labels: ['digest', 'label'],
  packs: ['key', 'size', 'chunks', 'packet', 'created', 'unused_check'],
  pack_users: ['pack', 'owner'],
  chunks: ['sha256', 'size', 'pack', 'offset', 'stored_size', 'encoding'],
  body_ends: ['sha256', 'size', 'class', 'hash_state', 'scan'],
  pushes: ['id', 'digest', 'size', 'bases', 'labels', 'created'],
  push_parts: ['push_id', 'number', 'pack', 'record', 'frames', 'bytes', 'stored_bytes'],
});
const INDEXED = {
  packets: [['thread_id', 'seq'], ['harness_kind', 'seq'], ['digest']],
  labels: [['digest']],
  packs: [['packet', 'key'], ['unused_check', 'created', 'key']],
  pack_users: [['owner', 'pack']],
  chunks: [['pack', 'sha256']],
};

/** `names` (tables, or { alias: table }) as [alias, table] pairs, each a table of `known`. */
function aliased(names, known) {
  const pairs = Array.isArray(names) ? names.map((t) => [t, t]) : Object.entries(names);
  for (const [alias, table] of pairs) {
    literal('name', alias);
    if (!known.includes(table)) throw new Error(`store query: ${JSON.stringify(table)} is not one of ${known.join(', ')}`);
  }
  return pairs;
}

/** The SQL of tableCounts. */
export function tableCountsSql(names) {
  return `SELECT ${aliased(names, TABLES).map(([a, t]) => `(SELECT count(*) FROM ${t}) AS ${a}`).join(', ')}`;
}

/** The SQL of countsAbout. */
export function countsAboutSql(digest, names) {
  const d = literal('digest', digest);
  return `SELECT ${aliased(names, Object.keys(ABOUT)).map(([a, t]) => `(SELECT count(*) FROM ${t} WHERE ${ABOUT[t]} = ${d}) AS ${a}`).join(', ')}`;
}

/** The SQL of storedBytes. */
export function storedBytesSql() {
  const len = (cols) => cols.map((c) => `coalesce(length(CAST(${c} AS BLOB)), 0)`).join(' + ');
  const parts = Object.entries(STORED).map(([t, cols]) => {
    const idx = (INDEXED[t] || []).map((cs) => ` + ${len(cs)}`).join('');
    return `(SELECT coalesce(sum(${len(cols)}${idx}), 0) FROM ${t})`;
  });
  return `SELECT ${parts.join(' + ')} AS n`;
}

/** Every query of this module, its values left as `:name` (store.test.mjs). */
export function allQueries() {
  const about = Object.fromEntries(Object.keys(ABOUT).map((t) => [t, t]));
  return {
    ...SQL,
    tableCounts: tableCountsSql(TABLES),
    countsAbout: countsAboutSql(`sha256:${'0'.repeat(64)}`, about),
    storedBytes: storedBytesSql(),
  };
}

// ---- counts (D1's rows, as it answers them: [{ … }]) -----------------------

/** The rows of each of `names` (tables, or { alias: table }): [{ alias: n }]. */
export const tableCounts = (edge, names) => edge.d1(tableCountsSql(names));

/**
 * The rows about packet `digest` in each of `names` (tables of ABOUT, or
 * { alias: table }): [{ alias: n }].
 */
export const countsAbout = (edge, digest, names) => edge.d1(countsAboutSql(digest, names));

/** The packet rows of `digest`: [{ n }]. */
export const packetCount = (edge, digest) => countsAbout(edge, digest, { n: 'packets' });

/** The rows of ref `ref`: [{ n }]. */
export const refCount = (edge, ref) => query(edge, 'refCount', { ref });

/** The history rows of ref `ref`: [{ n }]. */
export const refHistoryCount = (edge, ref) => query(edge, 'refHistoryCount', { ref });

/** Schema objects (tables, indexes) named `name`: [{ n }]. */
export const schemaObjectCount = (edge, name) => query(edge, 'schemaObjectCount', { name });

/** The rows of upload `id` and of its parts: [{ uploads, parts }]. */
export const uploadCounts = (edge, id) => query(edge, 'uploadCounts', { id });

/** The rows of chunks lying in pack `key`: [{ n }]. */
export const chunkCount = (edge, key) => query(edge, 'chunkCount', { key });

/** Packs that nothing uses: [{ n }]. */
export const packsWithoutUsersCount = (edge) => query(edge, 'packsWithoutUsersCount');

/** The bytes of every value the store keeps, its indexes' included (integers as their decimal text). */
export const storedBytes = (edge) => edge.d1(storedBytesSql())[0].n;

// ---- rows -------------------------------------------------------------------

/**
 * The R2 objects written for packet `digest` (its whole object, or the
 * packs of pushes of it): [{ key, users, unused_check }], by key.
 */
export const objectsOf = (edge, digest) => query(edge, 'objectsOf', { digest });

/** The refs whose names do not start with `prefix`: [{ name }]. */
export const refsOutside = (edge, prefix) => query(edge, 'refsOutside', { prefix });

/** The moves of ref `ref`, oldest first: [{ digest, token_id }]. */
export const refHistory = (edge, ref) => query(edge, 'refHistory', { ref });

/** Packet `digest`'s row: [{ member_count, object_key }]. */
export const packetObject = (edge, digest) => query(edge, 'packetObject', { digest });

/** How packet `digest` is stored: [{ storage }]. */
export const packetStorage = (edge, digest) => query(edge, 'packetStorage', { digest });

/** Every packet, in the order stored: [{ digest, storage, object_key, findings_kept }]. */
export const packetsInOrder = (edge) => query(edge, 'packetsInOrder');

/** Which of `digests` have a packet row: [{ digest }]. */
export const packetsAmong = (edge, digests) => query(edge, 'packetsAmong', { digests: [...new Set(digests)] });

/** The packs, of `keys`, with their rows: [{ key, unused_check, created, users }]. */
export const packRows = (edge, keys) => (keys.length ? query(edge, 'packRows', { keys }) : []);

/** The packs stored packet `digest` wrote and still uses: [{ key, chunks }]. */
export const packsWrittenForAndUsed = (edge, digest) => query(edge, 'packsWrittenForAndUsed', { digest });

/** Packs no one uses that the clean-up is not to look at: [{ key }]. */
export const unmarkedPacksWithoutUsers = (edge) => query(edge, 'unmarkedPacksWithoutUsers');

/**
 * Packs a stored packet or an open push uses that have no row: [{ pack }]
 * (uses by pushes that are gone are left out).
 */
export const usesOfMissingPacks = (edge) => query(edge, 'usesOfMissingPacks');

/** The chunks lying in packs `keys`: [{ pack, sha256 }]. */
export const chunksIn = (edge, keys) => (keys.length ? query(edge, 'chunksIn', { keys }) : []);

// ---- keys -------------------------------------------------------------------

const packsOf = (rows) => rows.map((r) => r.pack);

/** The packs stored packet `digest` uses, by key. */
export const packsOfPacket = (edge, digest) => packsOf(query(edge, 'packsUsedBy', { owner: digest }));

/** The packs open push `id` uses, by key. */
export const packsOfPush = (edge, id) => packsOf(query(edge, 'packsUsedBy', { owner: `push:${id}` }));

/** The packs open push `id` uses that nothing else does. */
export const packsOnlyOfPush = (edge, id) => packsOf(query(edge, 'packsOnlyUsedBy', { owner: `push:${id}` }));

/** The packs the parts of push `id` wrote. */
export const partPacks = (edge, id) => packsOf(query(edge, 'partPacks', { id }));

/** The record object of part `number` of push `id`. */
export const partRecord = (edge, id, number) => query(edge, 'partRecord', { id, number })[0].record;

/** Which of `keys` still have their pack row. */
export const packsAmong = (edge, keys) => (keys.length ? query(edge, 'packsAmong', { keys }).map((r) => r.key) : []);

// ---- changes the tests make to stage a race -----------------------------------

/** Undoes open push `id`'s use of packs `keys`. */
export function dropPushUses(edge, id, keys) {
  if (keys.length) query(edge, 'dropUses', { owner: `push:${id}`, keys });
}

/**
 * Dates packs `keys` back to 2000, past any TTL; `mark` also sets them
 * for the clean-up to look at.
 */
export function agePacks(edge, keys, { mark = false } = {}) {
  if (keys.length) query(edge, mark ? 'ageAndMark' : 'age', { keys });
}
