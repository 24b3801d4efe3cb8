// A bounded load test of the Worker under `wrangler dev --local` on
// 127.0.0.1: a fixed number of concurrent uploads, reads and range reads,
// with a time bound. Records throughput and the error rate (which must be
// zero), then checks that every stored packet still verifies.
//
// Run: node --test tests/e2e/load.test.mjs
// Tunables (environment): LOAD_CONCURRENCY (default 8), LOAD_READS
// (default 600), LOAD_MAX_SECONDS (default 240).
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { corpusCases, vectorPackets } from './corpus.mjs';
import { ROOT, TARGET, buildWorker, client, coreVerdict, sha256, startEdge } from './edge.mjs';
import { tableCounts } from './store.mjs';

const CONCURRENCY = Number(process.env.LOAD_CONCURRENCY ?? 8);
const READS = Number(process.env.LOAD_READS ?? 600);
const MAX_SECONDS = Number(process.env.LOAD_MAX_SECONDS ?? 240);

let edge;
let api;

before(async () => {
  buildWorker();
  edge = await startEdge();
  api = client(edge.url);
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

/** Runs `jobs` (functions returning promises) with `width` in flight. */
async function pool(jobs, width) {
  const results = new Array(jobs.length);
  let next = 0;
  const deadline = Date.now() + MAX_SECONDS * 1000;
  const worker = async () => {
    while (next < jobs.length) {
      if (Date.now() > deadline) throw new Error(`load test exceeded ${MAX_SECONDS} s`);
      const i = next++;
      results[i] = await jobs[i]();
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
  return results;
}

/** A deterministic generator for read choices. */
function rng(seed) {
  let x = seed;
  return (n) => {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    return x % n;
  };
}

test('concurrent uploads, reads and range reads: no errors, everything still verifies', { timeout: (MAX_SECONDS + 120) * 1000 }, async (t) => {
  const packets = [
    ...vectorPackets().map((v) => ({ name: `vector ${v.name}`, bytes: v.bytes, digest: v.digest })),
    ...corpusCases().filter((c) => c.expect.outcome === 'accept')
      .map((c) => ({ name: `case ${c.id}`, bytes: c.bytes, digest: c.digest })),
  ];
  const unique = [...new Map(packets.map((p) => [p.digest, p])).values()];
  const stats = { requests: 0, errors: [], bytesDown: 0, bytesUp: 0 };
  const expect = (what, r, statuses) => {
    stats.requests += 1;
    stats.bytesDown += r.bytes.length;
    if (!statuses.includes(r.status)) stats.errors.push(`${what}: ${r.status} ${JSON.stringify(r.json)}`);
  };

  // Phase 1: every packet uploaded twice, concurrently (the second upload
  // of each is idempotent: 200 or 201 whichever wins).
  const t0 = performance.now();
  const uploads = [...unique, ...unique].map((p) => async () => {
    stats.bytesUp += p.bytes.length;
    const r = await api.call('PUT', `/v1/packets/${p.digest}?label=load=1`, { body: p.bytes });
    expect(`PUT ${p.name}`, r, [200, 201]);
  });
  await pool(uploads, CONCURRENCY);
  const t1 = performance.now();

  // Phase 2: reads: whole packets, HEAD, byte ranges (checked against the
  // bytes), manifests, member reads with ranges, listings.
  const pick = rng(0x5eed);
  const reads = Array.from({ length: READS }, (_, i) => async () => {
    const p = unique[pick(unique.length)];
    const path = `/v1/packets/${p.digest}`;
    switch (i % 5) {
      case 0: {
        const r = await api.call('GET', path);
        expect(`GET ${p.name}`, r, [200]);
        if (!r.bytes.equals(p.bytes)) stats.errors.push(`GET ${p.name}: bytes differ`);
        break;
      }
      case 1: {
        const start = pick(p.bytes.length);
        const end = Math.min(p.bytes.length - 1, start + pick(8192));
        const r = await api.call('GET', path, { headers: { range: `bytes=${start}-${end}` } });
        expect(`range ${p.name}`, r, [206]);
        if (!r.bytes.equals(p.bytes.subarray(start, end + 1))) stats.errors.push(`range ${p.name} ${start}-${end}: bytes differ`);
        break;
      }
      case 2: {
        const r = await api.call('GET', `${path}/manifest`);
        expect(`manifest ${p.name}`, r, [200]);
        const files = (r.json?.members ?? []).filter((m) => m.type === 'file' && m.size > 0);
        if (files.length) {
          const m = files[pick(files.length)];
          const member = m.path.split('/').map(encodeURIComponent).join('/');
          const from = pick(m.size);
          const got = await api.call('GET', `${path}/members/${member}`, { headers: { range: `bytes=${from}-` } });
          expect(`member ${p.name} ${m.path}`, got, [206]);
          if (got.bytes.length !== m.size - from) stats.errors.push(`member range ${p.name} ${m.path}: ${got.bytes.length} bytes`);
        }
        break;
      }
      case 3:
        expect(`HEAD ${p.name}`, await api.call('HEAD', path), [200]);
        break;
      default:
        expect('list', await api.call('GET', '/v1/packets?label=load=1&limit=100'), [200]);
    }
  });
  await pool(reads, CONCURRENCY * 2);
  const t2 = performance.now();

  // Phase 3: every stored packet still verifies (bytes hash to the digest,
  // and packet-core accepts them).
  let verified = 0;
  for (const p of unique) {
    const r = await api.call('GET', `/v1/packets/${p.digest}`);
    assert.ok(r.bytes.equals(p.bytes), `${p.name}: the bytes uploaded`);
    const verdict = coreVerdict(r.bytes, p.digest);
    assert.equal(verdict.ok, true, `${p.name}: ${JSON.stringify(verdict)}`);
    verified += 1;
  }
  const listedRows = tableCounts(edge, { n: 'packets' });
  assert.deepEqual(listedRows, [{ n: unique.length }]);

  const seconds = (ms) => ms / 1000;
  const figures = {
    packets: unique.length,
    concurrency: CONCURRENCY,
    uploads: uploads.length,
    upload_seconds: +seconds(t1 - t0).toFixed(2),
    uploads_per_second: +(uploads.length / seconds(t1 - t0)).toFixed(1),
    upload_mib: +(stats.bytesUp / (1 << 20)).toFixed(2),
    read_requests: stats.requests - uploads.length,
    read_seconds: +seconds(t2 - t1).toFixed(2),
    reads_per_second: +((stats.requests - uploads.length) / seconds(t2 - t1)).toFixed(1),
    download_mib: +(stats.bytesDown / (1 << 20)).toFixed(2),
    requests: stats.requests,
    errors: stats.errors.length,
    error_rate: stats.errors.length / stats.requests,
    verified_after: verified,
  };
  t.diagnostic(JSON.stringify(figures));
  writeFileSync(join(TARGET, 'load-figures.json'), JSON.stringify(figures, null, 1) + '\n');
  assert.deepEqual(stats.errors.slice(0, 20), []);
  assert.equal(figures.error_rate, 0);
});
