// End-to-end tests of the packet inspector in Debian's headless Chromium,
// against the built page (inspector/dist) served on 127.0.0.1. The packets
// come from `cargo run -p packet-inspector-wasm --example fixtures` (see
// run.sh). Screenshots land in inspector/tests/out/screenshots/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { serve } from './server.mjs';
import { HERE, launch, openPage, screenshot, packet } from './browser.mjs';

const DIST = path.join(HERE, '..', 'dist');
let server;
let chromium;

before(async () => {
  assert.ok(fs.existsSync(path.join(DIST, 'pkg', 'packet_inspector_wasm_bg.wasm')), 'build the page first: bash inspector/build.sh');
  assert.ok(fs.existsSync(packet('good.packet')), 'generate the packets first: bash inspector/tests/run.sh');
  server = await serve(DIST);
  chromium = await launch();
});

after(async () => {
  await chromium?.close();
  await server?.close();
});

const sha256 = (bytes) => crypto.createHash('sha256').update(bytes).digest('hex');

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

async function openFile(page, name) {
  await page.setInputFiles('#file-a', packet(name));
  await page.waitForSelector('#banner[data-verdict]', { timeout: 20_000 });
  return page.getAttribute('#banner', 'data-verdict');
}

// Drops a file on the page the way a person drags it from a file manager.
async function dropFile(page, name) {
  const bytes = fs.readFileSync(packet(name)).toString('base64');
  await page.evaluate(([b64, fileName]) => {
    const bin = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bin], fileName));
    for (const type of ['dragenter', 'dragover', 'drop']) {
      window.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
    }
  }, [bytes, name]);
  await page.waitForSelector('#banner[data-verdict]', { timeout: 20_000 });
}

test('what the reader found is shown with the verified packet: secrets by line and rule, git settings, hooks', async () => {
  const { page, context, problems } = await openPage(chromium.browser, server.url);
  assert.equal(await openFile(page, 'findings.packet'), 'verified');
  const rows = await page.$$eval('[data-field=findings] tr[data-kind]', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  assert.deepEqual(rows, [
    ['secret', 'workspace/.env', '—', 'env-file'],
    ['secret', 'workspace/settings.json', '2', 'github-token'],
    ['git', 'workspace/.git/config', '3', 'core.fsmonitor: runs this program at every git status and at most other commands'],
    ['git', 'workspace/.git/hooks/post-checkout', '—', 'hook: git runs this executable hook at the operation it is named for'],
  ]);
  // Never the value.
  assert.ok(!(await page.textContent('#summary')).includes('ghp_'), 'no token value on the page');
  await screenshot(page, 'findings-reported');
  assert.deepEqual(problems, []);
  await context.close();
});

const rowPaths = (page) => page.$$eval('#tree [role=treeitem]', (rows) => rows.map((r) => r.dataset.path));

test('a good packet is verified; summary, tree and previews are correct', async () => {
  const { page, context, problems } = await openPage(chromium.browser, server.url);
  assert.equal(await openFile(page, 'good.packet'), 'verified');
  assert.match(await page.textContent('#banner'), /Verified/);

  // Summary: the digest the packet was built with, counts, harness, exclusions.
  const digest = fs.readFileSync(packet('good.digest'), 'utf8').trim();
  assert.equal(await page.textContent('[data-field=digest]'), digest);
  assert.equal(digest, packetName(fs.readFileSync(packet('good.packet'))));
  assert.equal(await page.textContent('[data-field=members]'), '19');
  const summary = await page.textContent('#summary');
  for (const text of ['codex', '019ad3c2-7a10-7c41-9e55-2b8f3c4d5e6f', 'gpt-5-codex', 'codex-auth', 'codex/auth.json', '8 files', '10 directories', '1 symlink']) {
    assert.ok(summary.includes(text), `summary shows ${text}`);
  }

  // Tree: roots expanded, directories collapsed below them; the symlink's target shown.
  assert.deepEqual(await rowPaths(page), [
    'harness', 'harness/codex', 'workspace', 'workspace/Cargo.toml', 'workspace/NOTES.txt', 'workspace/README.md',
    'workspace/assets', 'workspace/bin', 'workspace/run', 'workspace/src',
  ]);
  assert.equal(await page.textContent('[data-path="workspace/run"] [data-field=target]'), '→ bin/run');
  assert.equal(await page.getAttribute('[data-path="workspace/src"]', 'aria-expanded'), 'false');

  // Keyboard: focus the tree, walk down to src, open it, select main.rs.
  await page.focus('[data-path="harness"]');
  for (let i = 0; i < 9; i++) await page.keyboard.press('ArrowDown');
  assert.equal(await page.evaluate(() => document.activeElement.dataset.path), 'workspace/src');
  await page.keyboard.press('ArrowRight');
  assert.equal(await page.getAttribute('[data-path="workspace/src"]', 'aria-expanded'), 'true');
  await page.keyboard.press('ArrowDown');
  assert.equal(await page.evaluate(() => document.activeElement.dataset.path), 'workspace/src/main.rs');
  await page.keyboard.press('Enter');

  // Text preview with line numbers, after the member was re-hashed.
  await page.waitForSelector('[data-field=checked]');
  const lines = await page.$$eval('#text-preview .ln', (ls) => ls.map((l) => [l.children[0].textContent, l.children[1].textContent]));
  assert.equal(lines.length, 27);
  assert.deepEqual(lines[0], ['1', '// A tiny command-line tool.']);
  assert.deepEqual(lines[5], ['6', '    println!("hello, {}", args.join(" "));']);
  assert.equal(await page.getAttribute('[data-path="workspace/src/main.rs"]', 'aria-selected'), 'true');
  await screenshot(page, 'good-verified-text-preview');

  // Download: the bytes saved are the member's, matching the manifest sha256.
  const shown = await page.textContent('#preview [data-field=sha256]');
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
  const saved = fs.readFileSync(await download.path());
  assert.equal(download.suggestedFilename(), 'main.rs');
  assert.equal(sha256(saved), shown);
  assert.ok(saved.toString().startsWith('// A tiny command-line tool.\n'));

  // Image and binary previews.
  await page.click('[data-path="workspace/assets"]');
  await page.click('[data-path="workspace/assets/logo.png"]');
  await page.waitForSelector('#preview img');
  await page.waitForFunction(() => document.querySelector('#preview img').complete);
  assert.equal(await page.$eval('#preview img', (img) => img.naturalWidth), 48);
  await page.click('[data-path="workspace/assets/table.bin"]');
  await page.waitForSelector('#preview .hex');
  const hex = await page.textContent('#preview .hex');
  assert.ok(hex.startsWith('00000000  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f  ................'), hex.slice(0, 80));
  assert.match(await page.textContent('#preview'), /Binary file, 1000 B/);

  // Filter by path keeps matches and their ancestors; sort by size puts the largest first.
  await page.fill('#filter', 'main');
  assert.deepEqual(await rowPaths(page), ['workspace', 'workspace/src', 'workspace/src/main.rs']);
  await page.fill('#filter', '');
  await page.selectOption('#sort', 'size');
  const sorted = await rowPaths(page);
  assert.equal(sorted[0], 'workspace');
  assert.equal(sorted[1], 'workspace/assets');
  await screenshot(page, 'good-verified-sorted-by-size');

  // Every control has an accessible name; the tree has exactly one tab stop.
  const unnamed = await page.$$eval('input, select, button, a[href], [role=treeitem], [role=tab]', (els) => els
    .filter((e) => !(e.labels?.length || e.getAttribute('aria-label') || e.getAttribute('aria-labelledby') || e.textContent.trim()))
    .map((e) => e.outerHTML.slice(0, 80)));
  assert.deepEqual(unnamed, []);
  assert.equal(await page.$$eval('#tree [role=treeitem][tabindex="0"]', (r) => r.length), 1);
  assert.deepEqual(problems, []);
  await context.close();
});

test('the page follows a dark colour scheme', async () => {
  const { page, context, problems } = await openPage(chromium.browser, server.url, { colorScheme: 'dark' });
  assert.equal(await openFile(page, 'good.packet'), 'verified');
  await page.click('[data-path="workspace/README.md"]');
  await page.waitForSelector('[data-field=checked]');
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(bg, 'rgb(17, 20, 24)');
  await screenshot(page, 'good-verified-dark');
  assert.deepEqual(problems, []);
  await context.close();
});

test('a packet with one flipped body byte is refused, naming the member, and nothing is shown', async () => {
  const { page, context, problems } = await openPage(chromium.browser, server.url);
  await dropFile(page, 'tampered.packet');
  assert.equal(await page.getAttribute('#banner', 'data-verdict'), 'refused');
  assert.equal(await page.textContent('#banner [data-field=code]'), 'member_digest_mismatch');
  assert.equal(await page.textContent('#banner [data-field=path]'), 'workspace/src/main.rs');
  assert.match(await page.textContent('#banner'), /Nothing from it is shown/);
  assert.equal(await page.$$eval('#tree [role=treeitem]', (r) => r.length), 0);
  assert.equal(await page.textContent('#summary'), '');
  assert.equal(await page.isVisible('#panel-inspect'), false);
  await screenshot(page, 'tampered-refused');
  assert.deepEqual(problems, []);
  await context.close();
});

test('a member path climbing out of the workspace is refused', async () => {
  const { page, context, problems } = await openPage(chromium.browser, server.url);
  assert.equal(await openFile(page, 'traversal.packet'), 'refused');
  assert.equal(await page.textContent('#banner [data-field=code]'), 'path_not_canonical');
  assert.match(await page.textContent('#banner'), /workspace\/\.\.\/evil/);
  assert.equal(await page.$$eval('#tree [role=treeitem]', (r) => r.length), 0);
  await screenshot(page, 'traversal-refused');

  assert.equal(await openFile(page, 'escape.packet'), 'refused');
  assert.equal(await page.textContent('#banner [data-field=code]'), 'symlink_escapes');
  assert.equal(await page.textContent('#banner [data-field=path]'), 'workspace/link');
  assert.deepEqual(problems, []);
  await context.close();
});

test('two packets compare: added, removed and changed members, and a line diff', async () => {
  const { page, context, problems } = await openPage(chromium.browser, server.url);
  assert.equal(await openFile(page, 'good.packet'), 'verified');
  await page.click('#tab-compare');
  await page.setInputFiles('#file-b', packet('good-v2.packet'));
  await page.waitForSelector('#compare-result:not([hidden])', { timeout: 20_000 });
  const rows = await page.$$eval('#changes tr[data-status]', (rs) => rs.map((r) => `${r.dataset.status} ${r.dataset.path}`));
  assert.deepEqual(rows.sort(), [
    'added workspace/tests',
    'added workspace/tests/greet.rs',
    'changed harness/codex/sessions/2026/11/30/rollout-2026-11-30T03-00-00-019ad3c2-7a10-7c41-9e55-2b8f3c4d5e6f.jsonl',
    'changed workspace/src/main.rs',
    'removed workspace/NOTES.txt',
  ]);
  assert.equal(await page.textContent('[data-count=added]'), '2 added');
  assert.equal(await page.textContent('[data-count=removed]'), '1 removed');
  assert.equal(await page.textContent('[data-count=changed]'), '2 changed');
  // Size delta of main.rs: v2 is longer by the difference of the two bodies.
  const delta = await page.textContent('tr[data-path="workspace/src/main.rs"] td:last-child');
  assert.match(delta, /^\+\d+ B$/);

  await page.click('[data-diff="workspace/src/main.rs"]');
  await page.waitForSelector('#diff-view');
  const lines = await page.$$eval('#diff-view .ln', (ls) => ls.map((l) => `${l.dataset.tag}|${l.lastChild.textContent}`));
  assert.ok(lines.includes('delete|    println!("hello, {}", args.join(" "));'), lines.join('\n'));
  assert.ok(lines.includes('insert|    println!("hello, {name}");'));
  assert.ok(lines.includes('insert|    let name = args.first().map(String::as_str).unwrap_or("world");'));
  await screenshot(page, 'compare-with-diff');

  // A refused packet B is not compared.
  await page.setInputFiles('#file-b', packet('tampered.packet'));
  await page.waitForSelector('#compare-status [data-verdict=refused]');
  assert.equal(await page.getAttribute('#compare-status [data-verdict=refused]', 'data-code'), 'member_digest_mismatch');
  assert.equal(await page.isVisible('#compare-result'), false);
  assert.deepEqual(problems, []);
  await context.close();
});

test('a multi-chunk packet streams with progress, and a member past the first chunk previews intact', async () => {
  const { page, context, problems } = await openPage(chromium.browser, server.url);
  // Record every value the progress bar takes while the packet streams in.
  await page.evaluate(() => {
    window.progressSeen = [];
    new MutationObserver(() => window.progressSeen.push(document.getElementById('progress').value))
      .observe(document.getElementById('progress'), { attributes: true });
    new MutationObserver(() => window.progressSeen.push(document.getElementById('progress').value))
      .observe(document.getElementById('progress-text'), { childList: true, characterData: true, subtree: true });
  });
  assert.equal(await openFile(page, 'big-24.packet'), 'verified');
  const seen = await page.evaluate(() => window.progressSeen);
  assert.ok(seen.some((v) => v > 0 && v < 100), `progress between 0 and 100 was shown: ${seen}`);
  assert.equal(await page.textContent('[data-field=members]'), '9');
  const file = fs.readFileSync(packet('big-24.packet'));
  assert.equal(await page.textContent('[data-field=digest]'), packetName(file));

  await page.click('[data-path="workspace/data"]');
  await page.click('[data-path="workspace/data/blob-0004.bin"]');
  await page.waitForSelector('#preview .hex', { timeout: 20_000 });
  const shown = await page.textContent('#preview [data-field=sha256]');
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
  const saved = fs.readFileSync(await download.path());
  assert.equal(saved.length, 4_000_000);
  assert.equal(sha256(saved), shown);
  // The saved body is the member's bytes, found where they lie in the packet.
  assert.ok(file.indexOf(saved.subarray(0, 64)) > 3 * (4 << 20), "the member lies in the fourth 4 MiB chunk");
  const hexHead = saved.subarray(0, 16).toString('hex').match(/../g).join(' ');
  assert.ok((await page.textContent('#preview .hex')).startsWith(`00000000  ${hexHead}`));
  assert.deepEqual(problems, []);
  await context.close();
});
