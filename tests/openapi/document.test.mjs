// proto/openapi.yaml passes the tools its users load it into: it is strict
// YAML, openapi-spec-validator (PyPI) and Redocly's lint (npm, its
// recommended rules, each an error) accept it, and each check refuses a
// document broken the way it is meant to catch. Every error code the Worker
// answers with is named in it. (client.test.mjs compiles a client generated
// from it; tests/e2e/openapi.test.mjs checks the Worker's answers against it.)
//
// Run: node --test tests/openapi/document.test.mjs
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { DOCUMENT, ROOT, parseStrict, readDocument } from './document.mjs';

const text = readFileSync(DOCUMENT, 'utf8');
const work = mkdtempSync(join(tmpdir(), 'pillbox-openapi-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** A copy of the document with `from` replaced by `to` (once), as a file. */
function broken(name, from, to) {
  assert.ok(from instanceof RegExp ? from.test(text) : text.includes(from), `the document no longer has ${from}: update this test`);
  const path = join(work, `${name}.yaml`);
  writeFileSync(path, text.replace(from, to));
  return path;
}

/** In a flow mapping, a quoted description with a comma, unquoted: the comma then starts a key. */
const SPLIT = [/\{ description: "([^"]*, [^"]*)"/, '{ description: $1'];

function run(cmd, args, env = {}) {
  const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', env: { ...process.env, ...env } });
  assert.equal(r.error, undefined, `${cmd}: ${r.error}`);
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

describe('the document is strict YAML', () => {
  test('proto/openapi.yaml reads strictly, as OpenAPI 3.1', () => {
    const doc = readDocument();
    assert.equal(doc.openapi, '3.1.0');
    assert.ok(Object.keys(doc.paths).length >= 15);
  });

  test('the strict reader refuses a key split off by a comma, a key with no value and a key twice', () => {
    const refusals = [
      ['a: { description: As GET, without a body. }\n', /no value after "without a body\." \(line 1\)/],
      ['a:\n  b:\n  c: 1\n', /no value after "b" \(line 2\)/],
      ['a:\n  - 1\n  -\n', /an empty item/],
      ['a: 1\nb: 2\na: 3\n', /unique/],
      ['a: { b: 1, b: 2 }\n', /unique/],
    ];
    for (const [yaml, why] of refusals) assert.throws(() => parseStrict(yaml), why, JSON.stringify(yaml));
    assert.deepEqual(parseStrict('a: { description: "As GET, without a body.", b: null }\n'),
      { a: { description: 'As GET, without a body.', b: null } });
    assert.throws(() => readDocument(broken('split', ...SPLIT)), /no value after/);
  });
});

describe('independent OpenAPI 3.1 validators accept it', () => {
  const validator = (path) => run('python3', ['-m', 'openapi_spec_validator', '--errors', 'all', path]);

  test('openapi-spec-validator', (t) => {
    const version = run('python3', ['-m', 'openapi_spec_validator', '--version']);
    assert.equal(version.status, 0, `openapi-spec-validator is not installed (bash scripts/setup.sh --for test):\n${version.output}`);
    t.diagnostic(version.output.trim());
    const { status, output } = validator(DOCUMENT);
    assert.equal(status, 0, output);
    assert.match(output, /: OK/);
  });

  test('openapi-spec-validator refuses a key split off by a comma', () => {
    const { status, output } = validator(broken('split', ...SPLIT));
    assert.notEqual(status, 0, output);
    assert.match(output, /Unevaluated properties are not allowed/);
  });

  const REDOCLY = join(ROOT, 'node_modules/.bin/redocly');
  const lint = (path) => run(REDOCLY, ['lint', '--config', join(ROOT, 'tests/openapi/redocly.yaml'), '--format', 'json', path],
    { REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', REDOCLY_SUPPRESS_NOTIFICATIONS: 'true' });
  /** The rules that reported problems not ignored, from lint's JSON. */
  const reported = ({ output }) => {
    const json = JSON.parse(output.slice(output.indexOf('{'), output.lastIndexOf('}') + 1));
    return json.problems.filter((p) => !p.ignored).map((p) => `${p.ruleId} at ${p.location?.[0]?.pointer}: ${p.message}`);
  };

  test("Redocly's lint, every recommended rule an error", () => {
    const result = lint(DOCUMENT);
    assert.deepEqual(reported(result), [], 'problems Redocly reports');
    assert.equal(result.status, 0, result.output);
  });

  test("Redocly's lint refuses a key split off by a comma and an operation without an id", () => {
    const split = lint(broken('split', ...SPLIT));
    assert.notEqual(split.status, 0);
    assert.ok(reported(split).some((p) => p.startsWith('struct ')), reported(split).join('\n'));
    const anonymous = lint(broken('anonymous', /\n\s+operationId: getRef\n/, '\n'));
    assert.notEqual(anonymous.status, 0);
    assert.ok(reported(anonymous).some((p) => p.startsWith('operation-operationId ')), reported(anonymous).join('\n'));
  });
});

// ---- the Worker's error codes ------------------------------------------------

/** The Rust files under `dir`, without their `#[cfg(test)]` modules. */
function sources(dir) {
  return readdirSync(join(ROOT, dir), { recursive: true })
    .filter((f) => f.endsWith('.rs'))
    .map((f) => {
      const source = readFileSync(join(ROOT, dir, f), 'utf8');
      const tests = source.indexOf('#[cfg(test)]');
      return { file: `${dir}/${f}`, source: tests < 0 ? source : source.slice(0, tests) };
    });
}

/** Codes written where a refusal is made: `Problem::new(409, "code"`, `Problem::bad_request("code"`, ..., and wire's table of them (`Name = "code", 409,`). */
const CODE_SITES = [
  /^\s+[A-Z]\w+ = "([a-z][a-z0-9_]*)", \d{3},/gm,
  /Problem::(?:new|bad_request|conflict|too_large)\(\s*(?:\d{3},\s*)?"([a-z][a-z0-9_]*)"/g,
  /\brefused\(\s*"([a-z][a-z0-9_]*)"/g,
  /\bcode:\s*"([a-z][a-z0-9_]*)"/g,
  /^\s+[A-Z]\w+ => "([a-z][a-z0-9_]*)",$/gm,
];

test('every error code the Worker answers with is named in the document', () => {
  const codes = new Map();
  for (const { file, source } of [...sources('worker/src'), ...sources('wire/src')]) {
    for (const site of CODE_SITES) {
      for (const [, code] of source.matchAll(site)) codes.set(code, [...(codes.get(code) ?? []), file]);
    }
  }
  assert.ok(codes.size >= 40, `found only ${codes.size} codes in the Worker: did the way it writes refusals change?`);
  for (const code of ['part_size_invalid', 'precondition_invalid', 'tokens_invalid', 'chunk_batch_magic', 'zstd_window_too_large']) {
    assert.ok(codes.has(code), `${code} not found: did the way the Worker writes refusals change?`);
  }
  const named = new Set([...text.matchAll(/`([a-z][a-z0-9_]*)`/g)].map((m) => m[1]));
  const missing = [...codes].filter(([code]) => !named.has(code)).map(([code, files]) => `${code} (${[...new Set(files)].join(', ')})`);
  assert.deepEqual(missing, [], 'codes the Worker answers with that proto/openapi.yaml does not name (in `backquotes`)');
});
