// End-to-end: the page opens packets from the edge Worker (run locally in
// miniflare), by ref and by digest, previews a member through the Worker's
// single-member read, compares two edge packets, and refuses bytes that the
// edge (or anything in between) altered.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { serve } from './server.mjs';
import { HERE, launch, openPage, screenshot, packet } from './browser.mjs';
import { startEdge, publish } from './edge.mjs';

const DIST = path.join(HERE, '..', 'dist');
/**
 * A packet's name by its format's rule: for /2 the SHA-256 of its
 * packet.json (the first member's body), for /1 of the whole file.
 */
function packetName(bytes) {
  const size = parseInt(bytes.subarray(124, 136).toString('latin1').replace(/\0[\s\S]*$/, '').trim() || '0', 8);
  const json = bytes.subarray(512, 512 + size);
  const whole = JSON.parse(json.toString('utf8')).format === 'pillbox.session-packet/1';
  return `sha256:${crypto.createHash('sha256').update(whole ? bytes : json).digest('hex')}`;
}
const digestOf = packetName;
const good = fs.readFileSync(packet('good.packet'));
const v2 = fs.readFileSync(packet('good-v2.packet'));
let edge;
let server;
let chromium;
let corruptPath = null;
const served = [];

before(async () => {
  edge = await startEdge();
  await publish(edge.url, good, digestOf(good), 'team/main');
  await publish(edge.url, v2, digestOf(v2), 'team/next');
  server = await serve(DIST, { edge: edge.url, corrupt: (p) => p === corruptPath, onRequest: (m, p) => served.push(p) });
  chromium = await launch();
});

after(async () => {
  await chromium?.close();
  await server?.close();
  await edge?.close();
});

async function openFromEdge(page, input, box = '#edge-a') {
  await page.fill(box, input);
  await page.press(box, 'Enter');
}

test('a packet opens from the edge by ref, and a member previews through the member read', async () => {
  const { page, context, problems } = await openPage(chromium.browser, server.url);
  served.length = 0;
  await openFromEdge(page, 'team/main');
  await page.waitForSelector('#banner[data-verdict]', { timeout: 20_000 });
  assert.equal(await page.getAttribute('#banner', 'data-verdict'), 'verified');
  assert.equal(await page.textContent('[data-field=digest]'), digestOf(good));
  assert.match(await page.textContent('#banner'), /team\/main/);

  await page.click('[data-path="workspace/README.md"]');
  await page.waitForSelector('[data-field=checked]');
  assert.equal(await page.textContent('#text-preview .ln:first-child span:last-child'), '# greeter');
  assert.ok(served.includes('/v1/refs/team/main'), served.join('\n'));
  assert.ok(served.includes(`/v1/packets/${digestOf(good)}`));
  assert.ok(served.includes(`/v1/packets/${digestOf(good)}/members/workspace/README.md`));
  await screenshot(page, 'edge-by-ref');

  // Compare with the next packet, opened from the edge by digest.
  await page.click('#tab-compare');
  await openFromEdge(page, digestOf(v2), '#edge-b');
  await page.waitForSelector('#compare-result:not([hidden])', { timeout: 20_000 });
  assert.equal(await page.textContent('[data-count=added]'), '2 added');
  assert.equal(await page.textContent('[data-count=removed]'), '1 removed');
  await page.click('[data-diff="workspace/src/main.rs"]');
  await page.waitForSelector('#diff-view');
  assert.ok(await page.isVisible('#diff-view [data-tag=insert]'));
  assert.deepEqual(problems, []);
  await context.close();
});

test('?open= in the page address opens a packet from the edge as the page loads', async () => {
  const { page, context, problems } = await openPage(chromium.browser, `${server.url}/?open=${encodeURIComponent(digestOf(v2))}`);
  await page.waitForSelector('#banner[data-verdict]', { timeout: 20_000 });
  assert.equal(await page.getAttribute('#banner', 'data-verdict'), 'verified');
  assert.equal(await page.textContent('[data-field=digest]'), digestOf(v2));
  // "/" jumps to the filter.
  await page.click('#summary');
  await page.keyboard.press('/');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'filter');
  assert.deepEqual(problems, []);
  await context.close();
});

test('an unknown ref is refused with the edge\'s code', async () => {
  const { page, context } = await openPage(chromium.browser, server.url);
  await openFromEdge(page, 'team/nothing-here');
  await page.waitForSelector('#banner[data-verdict=refused]', { timeout: 20_000 });
  assert.equal(await page.textContent('#banner [data-field=code]'), 'not_found');
  await context.close();
});

test('bytes altered between the edge and the page are refused', async () => {
  const { page, context } = await openPage(chromium.browser, server.url);
  // The whole packet, altered in transit: the member whose body holds the
  // flipped byte fails, or the packet digest does.
  corruptPath = `/v1/packets/${digestOf(good)}`;
  await openFromEdge(page, 'team/main');
  await page.waitForSelector('#banner[data-verdict]', { timeout: 20_000 });
  assert.equal(await page.getAttribute('#banner', 'data-verdict'), 'refused');
  assert.ok(['member_digest_mismatch', 'packet_digest_mismatch', 'header_checksum', 'header_not_canonical', 'padding_not_zero', 'manifest_invalid']
    .includes(await page.textContent('#banner [data-field=code]')));
  assert.equal(await page.$$eval('#tree [role=treeitem]', (r) => r.length), 0);

  // Opening it again fetches it afresh (not the altered copy from the
  // HTTP cache), and verifies; then a member read back altered is refused.
  corruptPath = null;
  await openFromEdge(page, 'team/main');
  await page.waitForSelector('#banner[data-verdict=verified]', { timeout: 20_000 });
  corruptPath = `/v1/packets/${digestOf(good)}/members/workspace/src/main.rs`;
  await page.click('[data-path="workspace/src"]');
  await page.click('[data-path="workspace/src/main.rs"]');
  await page.waitForSelector('#preview .error-box');
  assert.equal(await page.getAttribute('#preview .error-box', 'data-code'), 'member_digest_mismatch');
  assert.equal(await page.$$eval('#text-preview', (x) => x.length), 0);
  await screenshot(page, 'edge-member-altered');
  corruptPath = null;
  await context.close();
});
