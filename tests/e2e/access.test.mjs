// Scoped access at the edge (docs/worker.md, "Access"), on the real Worker:
// every route × {no token, a wrong token, a token of each scope}; ref writes
// only under a token's prefix; a push's bases used only when the token may
// read them; the caching, sniffing and download headers behind a token and
// in public; CORS only for the configured origins.
//
// Run: node --test --test-concurrency=1 tests/e2e/access.test.mjs
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { TOKEN, buildWorker, client, fixtures, startEdge } from './edge.mjs';
import { refsOutside } from './store.mjs';
import { chunkBatch, cutsAndFrames, manifestFirst, pushBody, recipesDocument } from './wire.mjs';

/** A PBPUSH02 request for `entry`: the manifest's chunks (all of them),
 * the recipes and, unless `bodies` is false, the frames of every body. */
function pushRequest(entry, bytes, { bodies = true, have = () => false } = {}) {
  const sent = cutsAndFrames(entry, bytes, { have });
  const names = new Set(sent.recipes.manifest.map((c) => c.sha256.toString('hex')));
  const manifestFrames = sent.frames.filter((f) => names.has(f.sha256.toString('hex')));
  const frames = bodies ? manifestFirst(sent) : manifestFrames;
  return {
    body: pushBody(bodies ? sent.recipes : { manifest: sent.recipes.manifest }, frames),
    recipes: sent.recipes,
    bodyFrames: sent.frames.filter((f) => !names.has(f.sha256.toString('hex'))),
    headers: { 'content-type': 'application/x-pillbox-push' },
  };
}

/** A push of `entry` in three requests (create with the manifest, recipes,
 * one part); not completed. Returns { location, parts: [answer] }. */
async function pushInParts(api, entry, bytes, bases = []) {
  const req = pushRequest(entry, bytes, { bodies: false });
  const q = `/v1/pushes?digest=${entry.digest}&size=${entry.size}${bases.map((b) => `&base=${b}`).join('')}`;
  const create = await api.call('POST', q, req);
  assert.equal(create.status, 202, JSON.stringify(create.json));
  const rec = await api.call('POST', `${create.json.location}/recipes`, { body: recipesDocument({ bodies: req.recipes.bodies }) });
  assert.equal(rec.status, 200, JSON.stringify(rec.json));
  const part = await api.call('PUT', `${create.json.location}/parts/1`, { body: chunkBatch(req.bodyFrames) });
  return { location: create.json.location, parts: [part] };
}

/** One token per scope, and the sandbox's: read, push and its own session's refs. */
const SCOPES = {
  reader: ['read'],
  lister: ['list'],
  pusher: ['push'],
  namer: ['refs:sessions/x/'],
  deleter: ['delete'],
  admin: ['admin'],
  sandbox: ['read', 'push', 'refs:sessions/x/'],
};
const ORIGIN = 'http://inspector.test';

let edge; // the defaults: reads and listing need a token, no CORS origin
let open; // READ_ACCESS=public, a CORS origin; listing keeps needing a token
let fx;

before(async () => {
  buildWorker();
  fx = fixtures();
  [edge, open] = await Promise.all([
    startEdge({}, { tokens: SCOPES }),
    startEdge({ READ_ACCESS: 'public', CORS_ORIGIN: `${ORIGIN}, http://other.test` }, { tokens: SCOPES }),
  ]);
  for (const e of [edge, open]) {
    const stored = await client(e.url).call('PUT', `/v1/packets/${fx.index.small.digest}`, { body: fx.read('small') });
    assert.equal(stored.status, 201, JSON.stringify(stored.json));
  }
}, { timeout: 600_000 });

after(async () => {
  await Promise.all([edge?.stop(), open?.stop()]);
});

const code = (r) => r.json?.error?.code;
const as = (e, id) => client(e.url, id === undefined ? TOKEN : e.tokens[id] ?? id);
const UNKNOWN = `sha256:${'ab'.repeat(32)}`;
const NO_ID = '0123456789abcdef0123456789abcdef';

/**
 * Every route but GET /v1 and the inspector's pages, with the scope it
 * needs and the request's options. The requests are ones that pass once authorized (some then answer
 * 404, 400 or 409, never 401 or 403).
 */
function routes() {
  const small = fx.index.small;
  const P = `/v1/packets/${small.digest}`;
  return [
    ['read', 'GET', P],
    ['read', 'HEAD', P],
    ['read', 'GET', `${P}/manifest`],
    ['read', 'GET', `${P}/members/workspace/README.md`],
    ['read', 'HEAD', `${P}/members/workspace/README.md`],
    ['read', 'GET', `${P}/recipes`],
    ['read', 'POST', `${P}/chunks`, { body: { chunks: [] } }],
    ['read', 'GET', '/v1/refs/sessions/x/latest'],
    ['list', 'GET', '/v1/packets'],
    ['list', 'GET', '/v1/refs'],
    ['list', 'GET', '/v1/search?path=workspace/README.md'],
    ['list', 'GET', `/v1/search?sha256=${small.members.find((m) => m.path === 'workspace/README.md').sha256}`],
    ['push', 'PUT', P, { body: fx.read('small') }],
    ['push', 'POST', '/v1/uploads', { body: { digest: small.digest, size: small.size } }],
    ['push', 'GET', `/v1/uploads/${NO_ID}`],
    ['push', 'PUT', `/v1/uploads/${NO_ID}/parts/1`, { body: new Uint8Array(16) }],
    ['push', 'POST', `/v1/uploads/${NO_ID}/complete`],
    ['push', 'DELETE', `/v1/uploads/${NO_ID}`],
    ['push', 'POST', `/v1/pushes?digest=${small.digest}&size=${small.size}`, pushRequest(small, fx.read('small'))],
    ['push', 'GET', `/v1/pushes/${NO_ID}`],
    ['push', 'DELETE', `/v1/pushes/${NO_ID}`],
    ['push', 'POST', `/v1/pushes/${NO_ID}/recipes`, { body: recipesDocument({}) }],
    ['push', 'PUT', `/v1/pushes/${NO_ID}/parts/1`, { body: new Uint8Array(16) }],
    ['push', 'POST', `/v1/pushes/${NO_ID}/complete`],
    ['refs:sessions/x/', 'PUT', '/v1/refs/sessions/x/latest', { body: { digest: small.digest } }],
    ['refs:sessions/x/', 'DELETE', '/v1/refs/sessions/x/gone'],
    ['delete', 'DELETE', `/v1/packets/${UNKNOWN}`],
    ['admin', 'POST', '/v1/bench/baseline', { body: new Uint8Array(16) }],
  ];
}

const grants = (id, scope) => SCOPES[id].includes('admin') || SCOPES[id].includes(scope);

describe('every route × every kind of caller', () => {
  test('no token is 401, a wrong one 403 forbidden, the single PILLBOX_TOKEN passes everywhere', async () => {
    for (const [, method, path, opts] of routes()) {
      const where = `${method} ${path}`;
      const anonymous = await as(edge, null).call(method, path, opts);
      assert.equal(anonymous.status, 401, where);
      assert.match(anonymous.headers.get('www-authenticate'), /^Bearer/, where);
      if (method !== 'HEAD') assert.equal(code(anonymous), 'unauthorized', where);
      const wrong = await as(edge, 'not-a-token').call(method, path, opts);
      assert.equal(wrong.status, 403, where);
      if (method !== 'HEAD') assert.equal(code(wrong), 'forbidden', where);
      const single = await as(edge).call(method, path, opts);
      assert.ok(![401, 403].includes(single.status), `${where} with PILLBOX_TOKEN: ${single.status} ${code(single)}`);
    }
  });

  test('each scoped token passes exactly the routes of its scopes; the others are 403 scope_missing', async () => {
    const seen = {};
    for (const id of Object.keys(SCOPES)) {
      for (const [scope, method, path, opts] of routes()) {
        const where = `${id} (${SCOPES[id]}) ${method} ${path}`;
        const r = await as(edge, id).call(method, path, opts);
        if (grants(id, scope)) {
          assert.ok(![401, 403].includes(r.status), `${where}: ${r.status} ${code(r)}`);
          seen[`${scope} passes`] = true;
        } else {
          assert.equal(r.status, 403, where);
          if (method !== 'HEAD') {
            assert.equal(code(r), 'scope_missing', where);
            assert.ok(r.json.error.message.includes(JSON.stringify(id)), `${where}: the refusal names the token's id`);
            assert.ok(!JSON.stringify(r.json).includes(edge.tokens[id]), `${where}: never the token`);
          }
          seen[`${scope} refused`] = true;
        }
      }
    }
    for (const scope of ['read', 'list', 'push', 'refs:sessions/x/', 'delete', 'admin']) {
      assert.ok(seen[`${scope} passes`] && seen[`${scope} refused`], scope);
    }
  });

  test('a ref write outside the token\'s prefix is 403, whatever its other scopes', async () => {
    const digest = fx.index.small.digest;
    for (const id of ['namer', 'sandbox']) {
      for (const name of ['sessions/y/latest', 'sessions/x', 'sessions/xy/latest', 'other']) {
        const put = await as(edge, id).call('PUT', `/v1/refs/${name}`, { body: { digest } });
        assert.deepEqual([put.status, code(put)], [403, 'scope_missing'], `${id} PUT ${name}`);
        const del = await as(edge, id).call('DELETE', `/v1/refs/${name}`);
        assert.deepEqual([del.status, code(del)], [403, 'scope_missing'], `${id} DELETE ${name}`);
      }
      const inside = await as(edge, id).call('PUT', `/v1/refs/sessions/x/${id}`, { body: { digest } });
      assert.equal(inside.status, 201, `${id}: ${JSON.stringify(inside.json)}`);
    }
    assert.deepEqual(refsOutside(edge, 'sessions/x/'), []);
    // The admin token and the single token write anywhere.
    assert.equal((await as(edge, 'admin').call('PUT', '/v1/refs/sessions/y/latest', { body: { digest } })).status, 201);
    assert.equal((await as(edge).call('DELETE', '/v1/refs/sessions/y/latest')).status, 204);
  });
});

describe('a push\'s bases', () => {
  test('are ignored for a token that may not read them, so the missing list tells it nothing', { timeout: 180_000 }, async () => {
    const [base, edited] = [fx.index.base, fx.index.edited];
    assert.equal((await as(edge, 'admin').call('PUT', `/v1/packets/${base.digest}`, { body: fx.read('base') })).status, 201);
    const query = `/v1/pushes?digest=${edited.digest}&size=${edited.size}&base=${base.digest}`;
    const manifest = pushRequest(edited, fx.read('edited'), { bodies: false });
    const blind = await as(edge, 'pusher').call('POST', query, manifest);
    assert.equal(blind.status, 202, JSON.stringify(blind.json));
    assert.deepEqual(blind.json.bases_used, [], 'a push-only token gets no answer about the base');
    const sighted = await as(edge, 'sandbox').call('POST', query, manifest);
    assert.equal(sighted.status, 202);
    assert.deepEqual(sighted.json.bases_used, [base.digest]);
    assert.ok(sighted.json.missing.length < blind.json.missing.length,
      `with read, bodies in the base are not missing (${sighted.json.missing.length} < ${blind.json.missing.length})`);
    for (const [id, r] of [['pusher', blind], ['sandbox', sighted]]) {
      assert.equal((await as(edge, id).call('DELETE', r.json.location)).status, 204);
    }
    // On a store whose reads are public, anyone may read the base: it is used.
    assert.equal((await as(open, 'admin').call('PUT', `/v1/packets/${base.digest}`, { body: fx.read('base') })).status, 201);
    const publicBase = await as(open, 'pusher').call('POST', query, manifest);
    assert.deepEqual(publicBase.json.bases_used, [base.digest]);
    assert.equal((await as(open, 'pusher').call('DELETE', publicBase.json.location)).status, 204);
  });

  test('a part\'s stored_bytes says what the store held already only to a token that may read it', { timeout: 180_000 }, async () => {
    const edited = fx.index.edited;
    const held = (parts) => parts.reduce((n, p) => n + (p.json.bytes - p.json.stored_bytes), 0);
    // A first push's part puts the bodies in the store; later pushes of
    // the same packet (no base named) send them again.
    const first = await pushInParts(as(edge, 'sandbox'), edited, fx.read('edited'));
    assert.ok(first.parts.every((p) => p.status === 200), JSON.stringify(first.parts[0].json));
    const blind = await pushInParts(as(edge, 'pusher'), edited, fx.read('edited'));
    assert.ok(blind.parts.every((p) => p.status === 200));
    assert.equal(held(blind.parts), 0, 'a push-only token learns nothing of other pushes');
    const status = await as(edge, 'pusher').call('GET', blind.location);
    assert.ok(status.json.parts.every((p) => p.stored_bytes === p.bytes), JSON.stringify(status.json.parts));
    const sighted = await pushInParts(as(edge, 'sandbox'), edited, fx.read('edited'));
    assert.ok(held(sighted.parts) > 0, 'a reader is told which bytes were there already');
    for (const [id, r] of [['sandbox', first], ['pusher', blind], ['sandbox', sighted]]) {
      assert.equal((await as(edge, id).call('DELETE', r.location)).status, 204);
    }
  });

  test('a read+push+refs:sessions/x/ token pushes on a base, then checkpoints its session', { timeout: 180_000 }, async () => {
    const [base, edited] = [fx.index.base, fx.index.edited];
    const sandbox = as(edge, 'sandbox');
    const bodies = new Set(base.members.filter((m) => m.type === 'file').map((m) => `${m.sha256.slice(7)}/${m.size}`));
    const req = pushRequest(edited, fx.read('edited'), { have: (hex, size) => bodies.has(`${hex}/${size}`) });
    const r = await sandbox.call('POST', `/v1/pushes?digest=${edited.digest}&size=${edited.size}&base=${base.digest}`, req);
    assert.equal(r.status, 201, JSON.stringify(r.json));
    const named = await sandbox.call('PUT', '/v1/refs/sessions/x/checkpoint', { body: { digest: edited.digest } });
    assert.equal(named.status, 201);
    const got = await sandbox.call('GET', `/v1/packets/${edited.digest}`);
    assert.ok(got.bytes.equals(fx.read('edited')));
    // A push moves no ref, and the sandbox cannot list the store.
    assert.equal((await sandbox.call('GET', '/v1/refs')).status, 403);
  });
});

describe('headers', () => {
  test('behind a token: Vary: Authorization, private caching, nosniff, attachments', async () => {
    const P = `/v1/packets/${fx.index.small.digest}`;
    const reader = as(edge, 'reader');
    for (const [method, path] of [['GET', P], ['HEAD', P], ['GET', `${P}/manifest`], ['GET', `${P}/members/workspace/README.md`]]) {
      const r = await reader.call(method, path);
      assert.equal(r.status, 200, `${method} ${path}`);
      assert.equal(r.headers.get('cache-control'), 'private, max-age=31536000, immutable', `${method} ${path}`);
      assert.match(r.headers.get('vary') ?? '', /Authorization/, `${method} ${path}`);
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff', `${method} ${path}`);
    }
    const member = await reader.call('GET', `${P}/members/workspace/README.md`);
    assert.equal(member.headers.get('content-disposition'), 'attachment');
    assert.equal((await reader.call('GET', P)).headers.get('content-disposition'), 'attachment');
    const chunks = await reader.call('POST', `${P}/chunks`, { body: { chunks: [] } });
    assert.equal(chunks.status, 200);
    assert.equal(chunks.headers.get('content-disposition'), 'attachment');
    assert.equal(chunks.headers.get('x-content-type-options'), 'nosniff');
    const refused = await as(edge, null).call('GET', P);
    assert.equal(refused.headers.get('x-content-type-options'), 'nosniff');
  });

  test('public reads stay public and shared-cacheable; listing and search still need the list scope', async () => {
    const P = `/v1/packets/${fx.index.small.digest}`;
    const anonymous = as(open, null);
    for (const path of [P, `${P}/manifest`, `${P}/members/workspace/README.md`]) {
      const r = await anonymous.call('GET', path);
      assert.equal(r.status, 200, path);
      assert.equal(r.headers.get('cache-control'), 'public, max-age=31536000, immutable', path);
      assert.doesNotMatch(r.headers.get('vary') ?? '', /Authorization/, path);
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff', path);
    }
    assert.equal((await anonymous.call('GET', `${P}/members/workspace/README.md`)).headers.get('content-disposition'), 'attachment');
    for (const path of ['/v1/packets', '/v1/refs', '/v1/search?path=workspace/.env', `/v1/search?sha256=sha256:${'0'.repeat(64)}`]) {
      assert.equal((await anonymous.call('GET', path)).status, 401, path);
      assert.equal((await as(open, 'reader').call('GET', path)).status, 403, path);
      assert.equal((await as(open, 'lister').call('GET', path)).status, 200, path);
    }
    // Writes need their scopes whatever READ_ACCESS says.
    assert.equal((await anonymous.call('PUT', '/v1/refs/sessions/x/latest', { body: { digest: fx.index.small.digest } })).status, 401);
    assert.equal((await as(open, 'reader').call('DELETE', `/v1/packets/${UNKNOWN}`)).status, 403);
    const info = await anonymous.call('GET', '/v1');
    assert.equal(info.json.read_access, 'public');
    assert.equal((await as(edge, null).call('GET', '/v1')).json.read_access, 'token');
  });

  test('CORS: only the listed origins, none by default', async () => {
    const preflight = (e, origin) => as(e, null).call('OPTIONS', '/v1/packets', {
      headers: { origin, 'access-control-request-method': 'PUT', 'access-control-request-headers': 'authorization' },
    });
    const listed = await preflight(open, ORIGIN);
    assert.equal(listed.status, 204);
    assert.equal(listed.headers.get('access-control-allow-origin'), ORIGIN);
    assert.match(listed.headers.get('access-control-allow-headers'), /Authorization/);
    assert.match(listed.headers.get('vary') ?? '', /Origin/);
    assert.equal((await preflight(open, 'http://other.test')).headers.get('access-control-allow-origin'), 'http://other.test');
    const stranger = await preflight(open, 'http://evil.test');
    assert.equal(stranger.headers.get('access-control-allow-origin'), null);
    assert.equal(stranger.headers.get('access-control-allow-methods'), null);
    const byDefault = await preflight(edge, ORIGIN);
    assert.equal(byDefault.status, 204);
    assert.equal(byDefault.headers.get('access-control-allow-origin'), null);
    const read = await as(open, null).call('GET', `/v1/packets/${fx.index.small.digest}/manifest`, { headers: { origin: ORIGIN } });
    assert.equal(read.headers.get('access-control-allow-origin'), ORIGIN);
  });
});
