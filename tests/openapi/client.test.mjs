// A client generated from proto/openapi.yaml compiles: openapi-typescript
// generates the types of every path, operation and schema, and tsc
// compiles them with client/usage.ts, a client that pushes a packet, names
// it with a ref and reads it back through openapi-fetch. A document whose
// operation or field is renamed must fail to compile.
//
// Run: node --test tests/openapi/client.test.mjs
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';

import { DOCUMENT, ROOT, parseStrict } from './document.mjs';

const CLIENT = join(ROOT, 'tests/openapi/client');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

/** The media types of the document's binary bodies, typed as bytes. */
const BINARY = new Set(['application/x-tar', 'application/octet-stream', 'application/x-pillbox-chunks',
  'application/x-pillbox-push', 'application/x-pillbox-recipes']);
const BYTES = ts.factory.createTypeReferenceNode('Uint8Array');

/** TypeScript for the document `text`, as a user of the generator gets it. */
async function generate(text) {
  const document = parseStrict(text);
  const transform = (schema) => (schema.type === 'string' && BINARY.has(schema.contentMediaType) ? BYTES : undefined);
  return astToString(await openapiTS(document, { transform, silent: true }));
}

const work = mkdtempSync(join(tmpdir(), 'pillbox-openapi-client-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** Compiles usage.ts against the client generated from `text`; tsc's status and output. */
async function compile(text, name) {
  const dir = join(work, name);
  const generated = join(dir, 'pillbox-api.d.ts');
  const config = join(dir, 'tsconfig.json');
  spawnSync('mkdir', ['-p', dir]);
  writeFileSync(generated, await generate(text));
  writeFileSync(config, JSON.stringify({
    extends: join(CLIENT, 'tsconfig.json'),
    compilerOptions: { paths: { 'pillbox-api': [generated] } },
    files: [join(CLIENT, 'usage.ts'), generated],
  }));
  const r = spawnSync(process.execPath, [TSC, '--project', config, '--pretty', 'false'], { cwd: ROOT, encoding: 'utf8' });
  assert.notEqual(r.status, null, `tsc did not finish: ${r.error ?? r.signal}`);
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

const text = readFileSync(DOCUMENT, 'utf8');

test('the client generated from proto/openapi.yaml compiles with client/usage.ts', async () => {
  const { status, output } = await compile(text, 'document');
  assert.equal(status, 0, `tsc refused the generated client or usage.ts:\n${output}`);
});

test('a renamed operation id or field of the document fails to compile', async () => {
  const renames = [
    ['operationId: completePush', 'operationId: finishPush'],
    ['missing_chunks: { type: array', 'chunks_missing: { type: array'],
  ];
  let changed = text;
  for (const [from, to] of renames) {
    assert.ok(changed.includes(from), `the document no longer has ${JSON.stringify(from)}: update this test`);
    changed = changed.replace(from, to);
  }
  const { status, output } = await compile(changed, 'renamed');
  assert.notEqual(status, 0, 'tsc accepted a document without completePush and missing_chunks');
  assert.match(output, /completePush/);
  assert.match(output, /missing_chunks/);
});
