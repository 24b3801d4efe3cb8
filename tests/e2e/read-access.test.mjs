// With READ_ACCESS=token, reads need the bearer token too.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { buildWorker, client, startEdge } from './edge.mjs';

let edge;

before(async () => {
  buildWorker();
  edge = await startEdge({ READ_ACCESS: 'token' });
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

test('token-protected reads: 401 without, 403 wrong, 200 right', async () => {
  for (const path of ['/v1/packets', '/v1/refs', '/v1/search?path=workspace/a']) {
    assert.equal((await client(edge.url, null).call('GET', path)).status, 401, path);
    assert.equal((await client(edge.url, 'wrong').call('GET', path)).status, 403, path);
    assert.equal((await client(edge.url).call('GET', path)).status, 200, path);
  }
  const info = await client(edge.url).call('GET', '/v1');
  assert.equal(info.json.read_access, 'token');
});
