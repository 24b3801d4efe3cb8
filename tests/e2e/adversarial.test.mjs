// The adversarial corpus (tests/adversarial/cases.json) uploaded to the
// real Worker (`wrangler dev --local`), and the Worker's upload faults.
//
// - Every refused case: PUT /v1/packets/<digest> is 422 with the case's
//   code (and path); afterwards GET of the digest is 404, the listing shows
//   nothing and D1 holds no packet, member or label row. A case refused for
//   its expected digest (`digest_syntax`) is a malformed URL: 400 for the
//   PUT and the GET alike.
// - Every accepted case is stored (201) and reads back byte for byte; the
//   Worker logs the findings of each that holds any (secrets, git settings
//   that run programs), by path, line and rule, and of no other; stored
//   again by a delta push and by a multipart upload, each logs the same.
// - Faults: a client that disconnects mid-upload, multipart parts sent
//   twice and out of order for a hostile packet, an upload never completed.
//
// Run: node --test tests/e2e/adversarial.test.mjs
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { corpusCases } from './corpus.mjs';
import { TOKEN, buildWorker, client, startEdge, workerFixtures } from './edge.mjs';
import { packetCount, tableCounts } from './store.mjs';
import { cutsAndFrames, manifestFirst, pushBody } from './wire.mjs';

const MIB = 1 << 20;

let edge;
let api;
const cases = corpusCases();
const refused = cases.filter((c) => c.expect.outcome === 'refuse');
const accepted = cases.filter((c) => c.expect.outcome === 'accept');

before(async () => {
  buildWorker();
  // The corpus's verdicts are packet-core's under the format's own limits
  // (16 GiB for /2): the deployment's default MAX_PACKET_BYTES (1 GiB)
  // would refuse the cases that declare more with limit_size before their
  // own fault is reached. That tighter limit has its own tests.
  edge = await startEdge({ MAX_PACKET_BYTES: String(16 * 2 ** 30) });
  api = client(edge.url);
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

const hex = (digest) => digest.slice('sha256:'.length);

async function listed() {
  const r = await api.call('GET', '/v1/packets?limit=500');
  assert.equal(r.status, 200);
  return r.json.packets.map((p) => p.digest);
}

function rowCounts() {
  return tableCounts(edge, { packets: 'packets', packs: 'pack_users', labels: 'labels' })[0];
}

/** Sends the first `sendBytes` of a PUT body, then drops the connection. */
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

describe('the adversarial corpus', () => {
  test(`every refused case (${refused.length}) is 422 with its code and stores nothing`, async () => {
    assert.ok(refused.length >= 60);
    const failures = [];
    for (const c of refused) {
      // The digest is read from the URL before the body: a malformed one is the request's fault.
      const malformedUrl = c.expect.code === 'digest_syntax';
      const status = malformedUrl ? 400 : 422;
      const r = await api.call('PUT', `/v1/packets/${c.digest}?label=case=${c.id}`, { body: c.bytes });
      const e = r.json?.error ?? {};
      if (r.status !== status || e.code !== c.expect.code) {
        failures.push(`${c.id}: ${r.status} ${e.code}, expected ${status} ${c.expect.code}`);
      } else if (c.expect.path !== undefined && e.path !== c.expect.path) {
        failures.push(`${c.id}: path ${e.path}, expected ${c.expect.path}`);
      }
      const got = await api.call('GET', `/v1/packets/${c.digest}`);
      if (got.status !== (malformedUrl ? 400 : 404)) failures.push(`${c.id}: GET after the refusal is ${got.status}`);
    }
    assert.deepEqual(failures, []);
    assert.deepEqual(await listed(), [], 'the listing shows nothing');
    assert.deepEqual(rowCounts(), { packets: 0, packs: 0, labels: 0 }, 'D1 holds nothing');
    // R2, read back from the local state for a sample (a process each);
    // a malformed digest names no key.
    const wellFormed = refused.filter((c) => c.expect.code !== 'digest_syntax');
    for (const c of wellFormed.filter((_, i) => i % 25 === 0)) {
      assert.deepEqual(edge.objectsFor(c.digest), [], c.id);
    }
  });

  test(`every accepted case (${accepted.length}) is stored and reads back`, async () => {
    for (const c of accepted) {
      const r = await api.call('PUT', `/v1/packets/${c.digest}`, { body: c.bytes });
      assert.equal(r.status, 201, `${c.id}: ${JSON.stringify(r.json)}`);
      const got = await api.call('GET', `/v1/packets/${c.digest}`);
      assert.ok(got.bytes.equals(c.bytes), c.id);
    }
    assert.deepEqual(new Set(await listed()), new Set(accepted.map((c) => c.digest)));
    // The Worker's report of what each stored packet holds: one JSON log
    // line per packet with findings, exactly the table's.
    const logged = new Map();
    for (const entry of loggedFindings()) logged.set(entry.digest, entry.findings);
    const empty = { secrets: [], git: [] };
    for (const c of accepted) {
      const expected = c.expect.findings ?? empty;
      const none = expected.secrets.length === 0 && expected.git.length === 0;
      assert.deepEqual(logged.get(c.digest), none ? undefined : expected, c.id);
    }
  });
});

/** Every `packet_findings` line the Worker logged so far, in order. */
function loggedFindings() {
  const out = [];
  for (const line of edge.log().split('\n')) {
    // wrangler may prefix and colour the line: the object is what lies
    // between its first and last brace.
    const at = line.indexOf('{"event":"packet_findings"');
    if (at < 0) continue;
    out.push(JSON.parse(line.slice(at, line.lastIndexOf('}') + 1)));
  }
  return out;
}

/** Where everything lies in a packet, as packet-core's reader finds it. */
function describePacket(bytes) {
  const dir = mkdtempSync(join(tmpdir(), 'pillbox-e2e-describe-'));
  const file = join(dir, 'p.pkt');
  writeFileSync(file, bytes);
  return JSON.parse(workerFixtures(['describe', file]).stdout);
}

describe('findings, whichever way a packet is stored', () => {
  test('a push and a multipart upload of a packet with findings each log them', async () => {
    const withFindings = accepted.filter((c) => c.expect.findings && (c.expect.findings.secrets.length || c.expect.findings.git.length));
    assert.ok(withFindings.length >= 5);
    // wrangler's output reaches this process a little after the answer.
    const logsOf = async (digest, n) => {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const found = loggedFindings().filter((e) => e.digest === digest).map((e) => e.findings);
        if (found.length >= n || Date.now() > deadline) return found;
        await new Promise((ok) => setTimeout(ok, 100));
      }
    };
    for (const c of withFindings) {
      const before = (await logsOf(c.digest, 0)).length;
      assert.equal((await api.call('DELETE', `/v1/packets/${c.digest}`)).status, 204, c.id);
      const entry = describePacket(c.bytes);
      const sent = cutsAndFrames(entry, c.bytes);
      const pushed = await api.call('POST', `/v1/pushes?digest=${c.digest}&size=${c.bytes.length}`,
        { body: pushBody(sent.recipes, manifestFirst(sent)), headers: { 'content-type': 'application/x-pillbox-push' } });
      if (pushed.status === 422 && pushed.json.error.code === 'whole_upload_required') {
        // A /1 packet is taken whole only: uploaded whole again instead.
        assert.equal((await api.call('PUT', `/v1/packets/${c.digest}`, { body: c.bytes })).status, 201, c.id);
      } else {
        assert.equal(pushed.status, 201, `${c.id}: ${JSON.stringify(pushed.json)}`);
      }
      assert.deepEqual((await logsOf(c.digest, before + 1)).slice(before), [c.expect.findings], `${c.id}: pushed`);
      assert.equal((await api.call('DELETE', `/v1/packets/${c.digest}`)).status, 204, c.id);
      const up = await api.call('POST', '/v1/uploads', { body: { digest: c.digest, size: c.bytes.length } });
      assert.equal(up.status, 201, JSON.stringify(up.json));
      assert.equal((await api.call('PUT', `${up.json.location}/parts/1`, { body: c.bytes })).status, 200);
      const done = await api.call('POST', `${up.json.location}/complete`);
      assert.equal(done.status, 201, `${c.id}: ${JSON.stringify(done.json)}`);
      assert.deepEqual((await logsOf(c.digest, before + 2)).slice(before), [c.expect.findings, c.expect.findings], `${c.id}: uploaded in parts`);
    }
  });
});

describe('upload faults', () => {
  test('a client that disconnects mid-upload leaves nothing, and the upload can be repeated', async () => {
    // A hostile packet cut off halfway: nothing is stored or indexed.
    const before = rowCounts();
    const hostile = refused.find((x) => x.id === 'limit-members');
    const url = new URL(`${edge.url}/v1/packets/${hostile.digest}`);
    assert.notEqual(await interruptedPut(url, hostile.bytes, hostile.bytes.length >> 1), 201);
    assert.equal((await api.call('GET', `/v1/packets/${hostile.digest}`)).status, 404);
    assert.deepEqual(rowCounts(), before);
    // A valid packet (deleted first) cut off after 1 KiB, then sent whole.
    const valid = accepted.find((x) => x.id === 'accept-deep-nesting');
    assert.equal((await api.call('DELETE', `/v1/packets/${valid.digest}`)).status, 204);
    // Its object waits for the clean-up; the cut upload adds none.
    const left = edge.objectsFor(valid.digest);
    const cut = await interruptedPut(new URL(`${edge.url}/v1/packets/${valid.digest}`), valid.bytes, 1024);
    assert.notEqual(cut, 201);
    assert.equal((await api.call('GET', `/v1/packets/${valid.digest}`)).status, 404);
    assert.deepEqual(edge.objectsFor(valid.digest), left);
    assert.ok(left.every((o) => o.users === 0));
    const whole = await api.call('PUT', `/v1/packets/${valid.digest}`, { body: valid.bytes });
    assert.equal(whole.status, 201, JSON.stringify(whole.json));
  });

  test('a hostile packet uploaded in parts, out of order and twice, is refused at completion', async () => {
    const c = refused.find((x) => x.id === 'limit-members');
    assert.ok(c.bytes.length > 10 * MIB);
    const PART = 5 * MIB;
    const up = await api.call('POST', '/v1/uploads', { body: { digest: c.digest, size: c.bytes.length, part_size: PART } });
    assert.equal(up.status, 201, JSON.stringify(up.json));
    const part = (n) => c.bytes.subarray((n - 1) * PART, Math.min(n * PART, c.bytes.length));
    for (const n of [3, 1, 2, 1, 3]) {
      const r = await api.call('PUT', `${up.json.location}/parts/${n}`, { body: part(n) });
      assert.equal(r.status, 200, `part ${n}: ${JSON.stringify(r.json)}`);
    }
    const done = await api.call('POST', `${up.json.location}/complete`);
    assert.equal(done.status, 422, JSON.stringify(done.json));
    assert.equal(done.json.error.code, c.expect.code);
    assert.equal((await api.call('GET', `/v1/packets/${c.digest}`)).status, 404);
    assert.equal(edge.r2Has(`uploads/${up.json.upload_id}`), false, 'the staging object is gone');
    assert.deepEqual(edge.objectsFor(c.digest), []);
  });

  test('an upload never completed stores and indexes nothing', async () => {
    const valid = accepted.find((x) => x.id === 'accept-base');
    assert.equal((await api.call('DELETE', `/v1/packets/${valid.digest}`)).status, 204);
    const left = edge.objectsFor(valid.digest);
    const before = await listed();
    const up = await api.call('POST', '/v1/uploads', { body: { digest: valid.digest, size: valid.bytes.length } });
    assert.equal(up.status, 201, JSON.stringify(up.json));
    assert.equal((await api.call('PUT', `${up.json.location}/parts/1`, { body: valid.bytes })).status, 200);
    // Every part is there, but the upload is never completed: nothing is
    // readable, listed, indexed or stored under the packet's key.
    const status = await api.call('GET', up.json.location);
    assert.equal(status.status, 200);
    assert.deepEqual(status.json.missing, []);
    assert.equal((await api.call('GET', `/v1/packets/${valid.digest}`)).status, 404);
    assert.deepEqual(await listed(), before);
    assert.deepEqual(packetCount(edge, valid.digest), [{ n: 0 }]);
    // The assembled parts are not the packet's object until complete verifies them.
    assert.deepEqual(edge.objectsFor(valid.digest), left);
  });
});
