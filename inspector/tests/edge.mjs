// The edge Worker (worker/build, built by scripts/worker-build.sh) run
// locally in miniflare on 127.0.0.1, with in-memory R2 and D1 and the D1
// migrations applied: the page's "open from the edge" path talks to it.
import fs from 'node:fs';
import path from 'node:path';
import { Miniflare, convertV4MiniflareOptions } from 'miniflare';
import { HERE } from './browser.mjs';

const ROOT = path.resolve(HERE, '..', '..');
export const TOKEN = 'inspector-test-token';

export async function startEdge() {
  const script = path.join(ROOT, 'worker', 'build', 'index.js');
  if (!fs.existsSync(script)) throw new Error('build the Worker first: bash scripts/worker-build.sh');
  // The options as miniflare 4 named them; miniflare 5 converts them.
  const mf = new Miniflare(convertV4MiniflareOptions({
    // The bundle and the wasm module it imports (worker/build holds both).
    modules: [
      { type: 'ESModule', path: script },
      { type: 'CompiledWasm', path: path.join(path.dirname(script), 'index_bg.wasm') },
    ],
    modulesRoot: path.dirname(script),
    compatibilityDate: '2026-04-20',
    // wrangler.toml's: node:crypto and node:zlib (worker/src/platform.rs).
    compatibilityFlags: ['nodejs_compat'],
    r2Buckets: ['PACKETS'],
    d1Databases: ['INDEX'],
    bindings: { READ_ACCESS: 'public', PILLBOX_TOKEN: TOKEN, CORS_ORIGIN: '*' },
    host: '127.0.0.1',
    port: 0,
    cf: false,
  }));
  const url = await mf.ready;
  const db = await mf.getD1Database('INDEX');
  const migrations = path.join(ROOT, 'worker', 'migrations');
  for (const file of fs.readdirSync(migrations).sort()) {
    const sql = fs.readFileSync(path.join(migrations, file), 'utf8').replace(/--[^\n]*/g, '');
    for (const statement of sql.split(';').map((s) => s.trim()).filter(Boolean)) await db.prepare(statement).run();
  }
  return { url: url.toString(), close: () => mf.dispose() };
}

// Uploads a packet and names it with a ref, as a client would.
export async function publish(edge, bytes, digest, ref) {
  const auth = { authorization: `Bearer ${TOKEN}` };
  const put = await fetch(new URL(`/v1/packets/${digest}`, edge), {
    method: 'PUT', headers: { ...auth, 'content-type': 'application/octet-stream' }, body: bytes,
  });
  if (!put.ok) throw new Error(`upload: ${put.status} ${await put.text()}`);
  const name = await fetch(new URL(`/v1/refs/${ref}`, edge), {
    method: 'PUT', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ digest }),
  });
  if (!name.ok) throw new Error(`ref: ${name.status} ${await name.text()}`);
}
