// The local store's state files read directly (wrangler dev --persist-to
// DIR keeps D1 and R2's index as SQLite files under DIR/v3/): quicker than
// wrangler's CLI (about 30 ms against 2 s and a second of CPU a read, which
// the end-to-end tests do hundreds of times), and read-only (python3's
// sqlite3, `mode=ro`), so the running server is never disturbed. A read
// sees what the server has committed, as wrangler's CLI does (it opens the
// same files).
import { spawnSync } from 'node:child_process';

import { SQL } from './store.mjs';

const SCRIPT = `
import glob, json, sqlite3, sys
state, kind, queries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
files = sorted(f for f in glob.glob(state + '/v3/' + kind + '/*/*.sqlite') if 'metadata' not in f)
out = [[] for _ in queries]
size = 0
for f in files:
    c = sqlite3.connect('file:' + f + '?mode=ro', uri=True, timeout=30)
    size += c.execute('PRAGMA page_count').fetchone()[0] * c.execute('PRAGMA page_size').fetchone()[0]
    for i, q in enumerate(queries):
        try:
            out[i] += [list(r) for r in c.execute(q)]
        except sqlite3.OperationalError:
            pass
print(json.dumps({'rows': out, 'bytes': size}))
`;

/**
 * Runs each of `queries` over every SQLite file of `kind` ('d1', or 'r2'
 * for R2's object index, table `_mf_objects`) under `state`; returns
 * { rows: [rows of each query], bytes: the files' size in pages }.
 */
export function stateQuery(state, kind, queries) {
  const r = spawnSync('python3', ['-c', SCRIPT, state, kind, JSON.stringify(queries)], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`reading the local ${kind} state under ${state}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const ROWS = `
import glob, json, sqlite3, sys
state, kind, query = sys.argv[1], sys.argv[2], sys.argv[3]
files = [f for f in glob.glob(state + '/v3/' + kind + '/*/*.sqlite') if 'metadata' not in f]
if len(files) != 1:
    sys.exit('expected one %s database under %s, found %d' % (kind, state, len(files)))
c = sqlite3.connect('file:' + files[0] + '?mode=ro', uri=True, timeout=30)
c.row_factory = sqlite3.Row
plain = lambda v: list(v) if isinstance(v, bytes) else v
print(json.dumps([{k: plain(r[k]) for k in r.keys()} for r in c.execute(query)]))
`;

/**
 * The rows `query` (one statement that only reads) gives from the one
 * database of `kind` ('d1', or 'r2' for R2's object index) under
 * `state`, each an object by column name as D1 answers (a BLOB as its
 * bytes' list). Throws on a failed query.
 */
export function readRows(state, kind, query) {
  const r = spawnSync('python3', ['-c', ROWS, state, kind, query], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`reading the local ${kind} state under ${state} (${query}): ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/**
 * The packs a stored packet or an open push uses (`pack_users`) that have
 * lost their index row (`packs`) or their R2 object.
 */
export function packsInUse(state) {
  const d1 = stateQuery(state, 'd1', [SQL.usedPacks, SQL.packKeys]);
  const r2 = stateQuery(state, 'r2', ['SELECT key FROM _mf_objects']);
  const needed = d1.rows[0].map((r) => r[0]);
  const rows = new Set(d1.rows[1].map((r) => r[0]));
  const objects = new Set(r2.rows[0].map((r) => r[0]));
  return {
    needed,
    noRow: needed.filter((k) => !rows.has(k)),
    noObject: needed.filter((k) => !objects.has(k)),
    objects: objects.size,
  };
}
