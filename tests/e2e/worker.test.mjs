// End-to-end tests of the pillbox Worker: the real Worker under
// `wrangler dev --local`, driven over HTTP; stored state checked through
// the API and in the local R2 and D1 (tests/e2e/state.mjs).
//
// Run: node --test tests/e2e/
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';

import { TOKEN, buildWorker, client, coreVerdict, fixtures, sha256, startEdge } from './edge.mjs';
import { countsAbout, packetCount, packetObject } from './store.mjs';

const MIB = 1 << 20;
const LIMITS = {
  MAX_SINGLE_UPLOAD_BYTES: String(8 * MIB),
  PART_SIZE_BYTES: String(5 * MIB),
  MAX_PACKET_BYTES: String(16 * MIB),
  MAX_MEMBERS: '200',
};

let edge;
let api;
let fx;

before(async () => {
  buildWorker();
  fx = fixtures();
  edge = await startEdge({ ...LIMITS, CORS_ORIGIN: 'http://example.test' });
  api = client(edge.url);
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

const hex = (digest) => digest.slice('sha256:'.length);
const packetPath = (digest) => `/v1/packets/${digest}`;

function flip(bytes, offset) {
  const copy = Buffer.from(bytes);
  copy[offset] ^= 0x01;
  return copy;
}

/**
 * Asserts that nothing about `digest` is stored or indexed. A packet just
 * deleted (`deleted`) may still have objects in R2, but none in use and
 * each left to the clean-up (which deletes them: transfer.test.mjs).
 */
async function assertNothingStored(digest, { deleted = false } = {}) {
  const got = await api.call('GET', packetPath(digest));
  assert.equal(got.status, 404, `GET ${digest}`);
  const objects = edge.objectsFor(digest);
  if (deleted) {
    for (const o of objects) assert.deepEqual([o.users, o.unused_check], [0, 1], `R2 object ${o.key}`);
  } else {
    assert.deepEqual(objects, [], 'R2 objects');
  }
  const rows = countsAbout(edge, digest, { packets: 'packets', packs: 'pack_users' });
  assert.deepEqual(rows, [{ packets: 0, packs: 0 }], 'D1 rows');
}

describe('refused uploads leave nothing behind', () => {
  const cases = [
    ['a byte flipped in a member body', (i) => i.members.find((m) => m.path === 'workspace/src/data.bin').data_offset + 100, 'member_digest_mismatch'],
    ['a byte flipped in the manifest', (i) => i.manifest_offset + 12, null],
    ['a byte flipped in a header', (i) => i.members.find((m) => m.path === 'workspace/src').header_offset + 3, 'header_checksum'],
  ];
  for (const [name, where, expected] of cases) {
    test(name, async () => {
      const good = fx.index.small;
      const bytes = flip(fx.read('small'), where(good));
      const oracle = coreVerdict(bytes, good.digest);
      assert.equal(oracle.ok, false);
      if (expected) assert.equal(oracle.code, expected);
      for (const digest of [good.digest, sha256(bytes)]) {
        const r = await api.call('PUT', packetPath(digest), { body: bytes });
        assert.equal(r.status, 422, JSON.stringify(r.json));
        const e = r.json.error;
        const verdict = digest === good.digest ? oracle : coreVerdict(bytes, digest);
        assert.equal(e.code, verdict.code);
        assert.equal(e.path, verdict.path);
        assert.equal(e.offset, verdict.offset);
        assert.ok(e.message.length > 0 && e.advice.length > 0);
        await assertNothingStored(digest);
      }
    });
  }

  test('a wrong digest in the URL is packet_digest_mismatch', async () => {
    const other = fx.index.harness.digest;
    const r = await api.call('PUT', packetPath(other), { body: fx.read('small') });
    assert.equal(r.status, 422);
    assert.equal(r.json.error.code, 'packet_digest_mismatch');
    await assertNothingStored(other);
  });

  test('a malformed digest in the URL is 400 digest_syntax', async () => {
    const r = await api.call('PUT', '/v1/packets/sha256:ABCD', { body: fx.read('small') });
    assert.equal(r.status, 400);
    assert.equal(r.json.error.code, 'digest_syntax');
  });

  test('a truncated packet is refused as truncated', async () => {
    const bytes = fx.read('small').subarray(0, fx.index.small.size - 1024);
    const r = await api.call('PUT', packetPath(fx.index.small.digest), { body: bytes });
    assert.equal(r.status, 422);
    assert.equal(r.json.error.code, coreVerdict(bytes, fx.index.small.digest).code);
    assert.equal(r.json.error.code, 'truncated');
    await assertNothingStored(fx.index.small.digest);
  });

  test('more members than the configured limit is limit_members', async () => {
    const many = fx.index.many;
    const r = await api.call('PUT', packetPath(many.digest), { body: fx.read('many') });
    assert.equal(r.status, 422);
    assert.equal(r.json.error.code, 'limit_members');
    await assertNothingStored(many.digest);
  });

  test('oversize uploads are 413 before any byte is stored', async () => {
    const body = new Uint8Array(8 * MIB + 1);
    const single = await api.call('PUT', packetPath(fx.index.big.digest), { body });
    assert.equal(single.status, 413);
    assert.equal(single.json.error.code, 'upload_too_large');
    const create = await api.call('POST', '/v1/uploads', { body: { digest: fx.index.big.digest, size: 17 * MIB } });
    assert.equal(create.status, 413);
    assert.equal(create.json.error.code, 'limit_size');
    await assertNothingStored(fx.index.big.digest);
  });
});

describe('authentication', () => {
  test('writes without a token are 401, with a wrong token 403', async () => {
    const small = fx.index.small;
    const anonymous = client(edge.url, null);
    const wrong = client(edge.url, 'not-the-token');
    const writes = [
      ['PUT', packetPath(small.digest), fx.read('small')],
      ['POST', '/v1/uploads', { digest: small.digest, size: small.size }],
      ['PUT', '/v1/refs/sessions/x/latest', { digest: small.digest }],
      ['DELETE', packetPath(small.digest), undefined],
      ['DELETE', '/v1/refs/sessions/x/latest', undefined],
    ];
    for (const [method, path, body] of writes) {
      const a = await anonymous.call(method, path, { body });
      assert.equal(a.status, 401, `${method} ${path}`);
      assert.equal(a.json.error.code, 'unauthorized');
      assert.match(a.headers.get('www-authenticate'), /^Bearer/);
      const w = await wrong.call(method, path, { body });
      assert.equal(w.status, 403, `${method} ${path}`);
      assert.equal(w.json.error.code, 'forbidden');
      assert.ok(!JSON.stringify(w.json).includes('not-the-token'));
    }
    await assertNothingStored(small.digest);
    const reads = await anonymous.call('GET', '/v1/packets');
    assert.equal(reads.status, 401, 'listing needs a token by default');
  });

  test('CORS preflight lets an allowed origin\'s inspector send the token', async () => {
    const r = await fetch(`${edge.url}/v1/packets`, {
      method: 'OPTIONS',
      headers: { origin: 'http://example.test', 'access-control-request-method': 'PUT', 'access-control-request-headers': 'authorization' },
    });
    assert.equal(r.status, 204);
    assert.equal(r.headers.get('access-control-allow-origin'), 'http://example.test');
    assert.match(r.headers.get('access-control-allow-headers'), /Authorization/);
  });
});

describe('upload, read, name', () => {
  test('the same packet uploaded concurrently by several clients is stored once', async () => {
    const h = fx.index.harness;
    const bytes = fx.read('harness');
    const results = await Promise.all(
      Array.from({ length: 6 }, () => api.call('PUT', `${packetPath(h.digest)}?label=team=agents&label=host=ci-7`, { body: bytes })),
    );
    for (const r of results) assert.ok([200, 201].includes(r.status), JSON.stringify(r.json));
    assert.ok(results.some((r) => r.status === 201));
    assert.deepEqual(packetCount(edge, h.digest), [{ n: 1 }]);
    const [row] = packetObject(edge, h.digest);
    assert.equal(row.member_count, h.members.length);
    const got = await api.call('GET', packetPath(h.digest));
    assert.ok(got.bytes.equals(bytes), 'the bytes uploaded');
    assert.equal(edge.r2Has(row.object_key), true);
  });

  test('upload → list → get → manifest → member reads', async () => {
    const s = fx.index.small;
    const bytes = fx.read('small');
    const up = await api.call('PUT', `${packetPath(s.digest)}?label=kind=sample`, { body: bytes });
    assert.equal(up.status, 201, JSON.stringify(up.json));
    assert.equal(up.json.digest, s.digest);
    assert.equal(up.json.size, s.size);
    assert.equal(up.json.members, s.members.length);
    assert.equal(up.headers.get('location'), packetPath(s.digest));
    const again = await api.call('PUT', packetPath(s.digest), { body: bytes });
    assert.equal(again.status, 200, 'a second upload is idempotent');
    assert.equal(again.json.created, false);

    const list = await api.call('GET', '/v1/packets');
    const listed = list.json.packets.find((p) => p.digest === s.digest);
    assert.deepEqual(listed.labels, ['kind=sample']);
    assert.equal(listed.size, s.size);

    const got = await api.call('GET', packetPath(s.digest));
    assert.equal(got.status, 200);
    assert.ok(got.bytes.equals(bytes));
    assert.equal(got.headers.get('etag'), `"${s.digest}"`);
    assert.match(got.headers.get('cache-control'), /immutable/);

    const manifest = await api.call('GET', `${packetPath(s.digest)}/manifest`);
    assert.equal(manifest.status, 200);
    assert.ok(manifest.bytes.equals(bytes.subarray(s.manifest_offset, s.manifest_offset + s.manifest_len)));
    assert.deepEqual(manifest.json.members.map((m) => m.path), s.members.map((m) => m.path));

    for (const m of s.members.filter((x) => x.type === 'file')) {
      const r = await api.call('GET', `${packetPath(s.digest)}/members/${m.path.split('/').map(encodeURIComponent).join('/')}`);
      assert.equal(r.status, 200, m.path);
      assert.ok(r.bytes.equals(bytes.subarray(m.data_offset, m.data_offset + m.size)), m.path);
      assert.equal(r.headers.get('pillbox-member-sha256'), m.sha256);
      assert.equal(sha256(r.bytes), m.sha256);
    }
    const data = s.members.find((m) => m.path === 'workspace/src/data.bin');
    const part = await api.call('GET', `${packetPath(s.digest)}/members/${data.path}`, { headers: { range: 'bytes=1000-1999' } });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get('content-range'), `bytes 1000-1999/${data.size}`);
    assert.ok(part.bytes.equals(bytes.subarray(data.data_offset + 1000, data.data_offset + 2000)));
    const link = await api.call('GET', `${packetPath(s.digest)}/members/workspace/main`);
    assert.equal(link.status, 404);
    assert.equal(link.json.error.code, 'not_a_file');
    const none = await api.call('GET', `${packetPath(s.digest)}/members/workspace/nope`);
    assert.equal(none.status, 404);
  });

  test('HEAD and Range on a packet', async () => {
    const s = fx.index.small;
    const bytes = fx.read('small');
    const head = await api.call('HEAD', packetPath(s.digest));
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(s.size));
    assert.equal(head.headers.get('etag'), `"${s.digest}"`);
    assert.equal(head.headers.get('accept-ranges'), 'bytes');
    assert.equal(head.bytes.length, 0);

    const first = await api.call('GET', packetPath(s.digest), { headers: { range: 'bytes=0-99' } });
    assert.equal(first.status, 206);
    assert.equal(first.headers.get('content-range'), `bytes 0-99/${s.size}`);
    assert.equal(first.headers.get('content-length'), '100');
    assert.ok(first.bytes.equals(bytes.subarray(0, 100)));

    const suffix = await api.call('GET', packetPath(s.digest), { headers: { range: 'bytes=-1024' } });
    assert.equal(suffix.status, 206);
    assert.equal(suffix.headers.get('content-range'), `bytes ${s.size - 1024}-${s.size - 1}/${s.size}`);
    assert.ok(suffix.bytes.equals(bytes.subarray(s.size - 1024)));

    const open = await api.call('GET', packetPath(s.digest), { headers: { range: `bytes=${s.size - 10}-` } });
    assert.equal(open.status, 206);
    assert.ok(open.bytes.equals(bytes.subarray(s.size - 10)));

    const beyond = await api.call('GET', packetPath(s.digest), { headers: { range: `bytes=${s.size}-` } });
    assert.equal(beyond.status, 416);
    assert.equal(beyond.headers.get('content-range'), `bytes */${s.size}`);

    const headRange = await api.call('HEAD', packetPath(s.digest), { headers: { range: 'bytes=10-19' } });
    assert.equal(headRange.status, 206);
    assert.equal(headRange.headers.get('content-length'), '10');

    const cached = await api.call('GET', packetPath(s.digest), { headers: { 'if-none-match': `"${s.digest}"` } });
    assert.equal(cached.status, 304);
    assert.equal(cached.bytes.length, 0);
  });

  test('list filters and cursor pagination', async () => {
    const h = fx.index.harness;
    const s = fx.index.small;
    const codex = await api.call('GET', '/v1/packets?harness=codex');
    assert.deepEqual(codex.json.packets.map((p) => p.digest), [h.digest]);
    assert.deepEqual(codex.json.packets[0].harness, { kind: 'codex', thread_id: h.harness.thread_id, model: 'gpt-5-codex' });
    const thread = await api.call('GET', `/v1/packets?thread_id=${h.harness.thread_id}`);
    assert.deepEqual(thread.json.packets.map((p) => p.digest), [h.digest]);
    const label = await api.call('GET', '/v1/packets?label=team=agents&label=host=ci-7');
    assert.deepEqual(label.json.packets.map((p) => p.digest), [h.digest]);
    const noMatch = await api.call('GET', '/v1/packets?label=team=agents&label=kind=sample');
    assert.deepEqual(noMatch.json.packets, []);

    const seen = [];
    let cursor = null;
    for (let page = 0; page < 10; page++) {
      const r = await api.call('GET', `/v1/packets?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(r.status, 200);
      assert.ok(r.json.packets.length <= 1);
      seen.push(...r.json.packets.map((p) => p.digest));
      cursor = r.json.next_cursor;
      if (!cursor) break;
    }
    assert.deepEqual(seen, [s.digest, h.digest], 'newest first, each once');
    const bad = await api.call('GET', '/v1/packets?limit=0');
    assert.equal(bad.status, 400);
  });

  test('search finds packets by member path and by blob sha256', async () => {
    const s = fx.index.small;
    const data = s.members.find((m) => m.path === 'workspace/src/data.bin');
    const byHash = await api.call('GET', `/v1/search?sha256=${data.sha256}`);
    assert.deepEqual(byHash.json.matches.map((m) => [m.digest, m.path]), [[s.digest, data.path]]);
    const byPath = await api.call('GET', '/v1/search?path=workspace/README.md');
    assert.deepEqual(byPath.json.matches.map((m) => m.digest), [s.digest]);
    const nothing = await api.call('GET', '/v1/search?path=workspace/absent');
    assert.deepEqual(nothing.json.matches, []);
    const both = await api.call('GET', '/v1/search?path=a&sha256=b');
    assert.equal(both.status, 400);
  });

  test('refs: create-only, compare-and-swap, conflict, pull by ref, delete', async () => {
    const s = fx.index.small;
    const h = fx.index.harness;
    const ref = '/v1/refs/sessions/demo/latest';
    const created = await api.call('PUT', ref, { body: { digest: s.digest } });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    assert.equal(created.json.digest, s.digest);

    const again = await api.call('PUT', ref, { body: { digest: h.digest } });
    assert.equal(again.status, 409, 'without If-Match a ref is create-only');
    assert.equal(again.json.error.code, 'ref_conflict');
    assert.equal(again.json.error.current, s.digest);

    const swapped = await api.call('PUT', ref, { body: { digest: h.digest }, headers: { 'if-match': `"${s.digest}"` } });
    assert.equal(swapped.status, 200);
    assert.equal(swapped.json.previous, s.digest);

    const stale = await api.call('PUT', ref, { body: { digest: s.digest }, headers: { 'if-match': `"${s.digest}"` } });
    assert.equal(stale.status, 409, 'a writer holding a stale digest does not overwrite');
    assert.equal(stale.json.error.current, h.digest);

    const absent = await api.call('PUT', '/v1/refs/sessions/none/latest', { body: { digest: s.digest }, headers: { 'if-match': `"${s.digest}"` } });
    assert.equal(absent.status, 409);
    assert.equal(absent.json.error.current, null);

    const unknown = await api.call('PUT', '/v1/refs/sessions/other/latest', { body: { digest: fx.index.big.digest } });
    assert.equal(unknown.status, 404, 'a ref names a stored packet');

    // Pull by ref: resolve, download, check the bytes against the digest.
    const resolved = await api.call('GET', ref);
    assert.equal(resolved.status, 200);
    assert.equal(resolved.headers.get('etag'), `"${h.digest}"`);
    const pulled = await api.call('GET', packetPath(resolved.json.digest));
    assert.ok(pulled.bytes.equals(fx.read('harness')));

    const listed = await api.call('GET', '/v1/refs?prefix=sessions/');
    assert.deepEqual(listed.json.refs.map((r) => [r.name, r.digest]), [['sessions/demo/latest', h.digest]]);

    const referenced = await api.call('DELETE', packetPath(h.digest));
    assert.equal(referenced.status, 409);
    assert.equal(referenced.json.error.code, 'packet_referenced');

    const wrongDelete = await api.call('DELETE', ref, { headers: { 'if-match': `"${s.digest}"` } });
    assert.equal(wrongDelete.status, 409);
    const deleted = await api.call('DELETE', ref, { headers: { 'if-match': `"${h.digest}"` } });
    assert.equal(deleted.status, 204);
    assert.equal((await api.call('GET', ref)).status, 404);
    assert.equal((await api.call('DELETE', ref)).status, 404);
  });

  test('deleting a packet removes its bytes and its index rows', async () => {
    const h = fx.index.harness;
    const r = await api.call('DELETE', packetPath(h.digest));
    assert.equal(r.status, 204);
    await assertNothingStored(h.digest, { deleted: true });
    assert.deepEqual(countsAbout(edge, h.digest, { n: 'labels' }), [{ n: 0 }]);
  });
});

/** Sends `bytes` as the body of a PUT but stops after `sendBytes` (a dropped connection). */
function interruptedPut(url, bytes, sendBytes) {
  return new Promise((ok) => {
    const req = request(url, {
      method: 'PUT',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-length': bytes.length },
      agent: false,
    });
    req.on('error', () => ok('dropped'));
    req.on('response', (res) => { res.resume(); res.on('end', () => ok(res.statusCode)); });
    req.write(bytes.subarray(0, sendBytes), () => setTimeout(() => req.destroy(), 200));
  });
}

describe('multipart uploads', () => {
  const PART = 5 * MIB;

  async function create(name, extra = {}) {
    const p = fx.index[name];
    const r = await api.call('POST', '/v1/uploads', { body: { digest: p.digest, size: p.size, part_size: PART, ...extra } });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    return r.json;
  }

  const partOf = (bytes, n) => bytes.subarray((n - 1) * PART, Math.min(n * PART, bytes.length));

  test('interrupted, resumed, parts out of order and twice, then verified', async () => {
    const big = fx.index.big;
    const bytes = fx.read('big');
    const upload = await create('big', { labels: ['via=multipart'] });
    assert.equal(upload.parts, 3);
    assert.deepEqual(upload.missing, [1, 2, 3]);
    const put = (n, body = partOf(bytes, n)) => api.call('PUT', `${upload.location}/parts/${n}`, { body });

    assert.equal((await put(3)).status, 200);
    assert.equal((await put(1)).status, 200);
    // Part 2 is cut off halfway: the connection drops.
    const target = new URL(`${edge.url}${upload.location}/parts/2`);
    const dropped = await interruptedPut(target, partOf(bytes, 2), PART / 2);
    assert.notEqual(dropped, 200);

    const status = await api.call('GET', upload.location);
    assert.equal(status.status, 200);
    assert.deepEqual(status.json.missing, [2], 'the client resumes from the upload status');
    const early = await api.call('POST', `${upload.location}/complete`);
    assert.equal(early.status, 409);
    assert.equal(early.json.error.code, 'upload_incomplete');

    const short = await put(2, partOf(bytes, 2).subarray(1));
    assert.equal(short.status, 400);
    assert.equal(short.json.error.code, 'part_size_mismatch');
    assert.equal((await put(1)).status, 200, 'a part sent twice replaces itself');
    assert.equal((await put(2)).status, 200);

    const done = await api.call('POST', `${upload.location}/complete`);
    assert.equal(done.status, 201, JSON.stringify(done.json));
    assert.equal(done.json.digest, big.digest);
    assert.deepEqual(done.json.labels, ['via=multipart']);
    const got = await api.call('GET', packetPath(big.digest));
    assert.ok(got.bytes.equals(bytes));
    const blob = big.members.find((m) => m.path === 'workspace/blob-b.bin');
    const member = await api.call('GET', `${packetPath(big.digest)}/members/${blob.path}`);
    assert.equal(sha256(member.bytes), blob.sha256);
    // The assembled object, verified by reading it once, is the packet's object.
    const [row] = packetObject(edge, big.digest);
    assert.equal(row.object_key, `uploads/${upload.upload_id}`, 'the assembled object is kept, not copied');
    assert.equal(edge.r2Has(row.object_key), true);
    assert.equal((await api.call('GET', upload.location)).status, 404);

    const repeat = await api.call('POST', '/v1/uploads', { body: { digest: big.digest, size: big.size } });
    assert.equal(repeat.status, 200, 'creating an upload for a stored packet is idempotent');
    assert.equal(repeat.json.created, false);
  });

  test('a tampered multipart upload is refused after assembly and leaves nothing', async () => {
    // A /1 packet (named by its whole file), flipped in a body, uploaded
    // under the hash of what is sent.
    const big = fx.index['v1-big'];
    const blob = big.members.find((m) => m.path === 'workspace/blob-a.bin');
    const bytes = flip(fx.read('v1-big'), blob.data_offset + 3 * MIB);
    const digest = sha256(bytes);
    const r = await api.call('POST', '/v1/uploads', { body: { digest, size: bytes.length, part_size: PART } });
    assert.equal(r.status, 201);
    for (const n of [2, 3, 1]) {
      assert.equal((await api.call('PUT', `${r.json.location}/parts/${n}`, { body: partOf(bytes, n) })).status, 200);
    }
    const done = await api.call('POST', `${r.json.location}/complete`);
    assert.equal(done.status, 422);
    const oracle = coreVerdict(bytes, digest);
    assert.equal(done.json.error.code, 'member_digest_mismatch');
    assert.equal(done.json.error.code, oracle.code);
    assert.equal(done.json.error.path, blob.path);
    await assertNothingStored(digest);
    assert.equal(edge.r2Has(`uploads/${r.json.upload_id}`), false);
    assert.equal((await api.call('GET', r.json.location)).status, 404);
  });

  test('an aborted upload is forgotten', async () => {
    const s = fx.index.many;
    const r = await api.call('POST', '/v1/uploads', { body: { digest: s.digest, size: s.size } });
    assert.equal(r.status, 201);
    assert.equal((await api.call('DELETE', r.json.location)).status, 204);
    assert.equal((await api.call('GET', r.json.location)).status, 404);
  });
});
