// The tests' queries of the store (store.mjs) against its schema, without
// a Worker: the tables and columns the migrations (worker/migrations/*.sql,
// in order) leave are read from their CREATE TABLE, ALTER TABLE and DROP
// statements, and every table and column each query names must be one of
// them. And the values a query is about are checked for their shape.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { ROOT } from './edge.mjs';
import { ABOUT, SQL, STORED, TABLES, allQueries, bind, countsAboutSql, packetCount, tableCountsSql } from './store.mjs';

const MIGRATIONS = join(ROOT, 'worker/migrations');

/** SQL without its comments and string literals (each literal becomes ''). */
function plain(sql) {
  return sql.replace(/'(?:[^']|'')*'|--[^\n]*/g, (m) => (m.startsWith('--') ? '' : "''"));
}

/** Splits `text` at the commas outside parentheses. */
function topLevel(text) {
  const out = [''];
  let depth = 0;
  for (const c of text) {
    if (c === '(') depth++;
    if (c === ')') depth--;
    if (c === ',' && depth === 0) out.push('');
    else out[out.length - 1] += c;
  }
  return out.map((s) => s.trim()).filter(Boolean);
}

/** The tables the migrations leave: Map(table → Set(columns)). */
function schemaOf(dir) {
  const tables = new Map();
  const files = readdirSync(dir).filter((f) => f.endsWith('.sql')).sort();
  for (const file of files) {
    for (const raw of plain(readFileSync(join(dir, file), 'utf8')).split(';')) {
      const s = raw.trim().replace(/\s+/g, ' ');
      let m;
      if ((m = /^CREATE TABLE (?:IF NOT EXISTS )?(\w+) \((.*)\)(?: WITHOUT ROWID)?$/i.exec(s))) {
        const columns = topLevel(m[2])
          .filter((item) => !/^(PRIMARY KEY|UNIQUE|CHECK|FOREIGN KEY|CONSTRAINT)\b/i.test(item))
          .map((item) => item.split(' ')[0]);
        tables.set(m[1], new Set(columns));
      } else if ((m = /^ALTER TABLE (\w+) ADD (?:COLUMN )?(\w+)/i.exec(s))) {
        assert.ok(tables.has(m[1]), `${file}: ALTER TABLE of ${m[1]}, not made before`);
        tables.get(m[1]).add(m[2]);
      } else if ((m = /^ALTER TABLE (\w+) DROP (?:COLUMN )?(\w+)$/i.exec(s))) {
        tables.get(m[1]).delete(m[2]);
      } else if ((m = /^ALTER TABLE (\w+) RENAME (?:COLUMN )?(\w+) TO (\w+)$/i.exec(s))) {
        const cols = tables.get(m[1]);
        cols.delete(m[2]);
        cols.add(m[3]);
      } else if ((m = /^ALTER TABLE (\w+) RENAME TO (\w+)$/i.exec(s))) {
        tables.set(m[2], tables.get(m[1]));
        tables.delete(m[1]);
      } else if ((m = /^DROP TABLE (?:IF EXISTS )?(\w+)$/i.exec(s))) {
        tables.delete(m[1]);
      } else {
        assert.ok(!/^(CREATE TABLE|ALTER TABLE)\b/i.test(s), `${file}: a statement this check does not read: ${s}`);
      }
    }
  }
  return tables;
}

/** SQLite's own table of the schema. */
const BUILTIN = new Map([['sqlite_master', new Set(['type', 'name', 'tbl_name', 'rootpage', 'sql'])]]);

const KEYWORDS = new Set(`select from where and or not exists in is null as order by distinct update set delete
  like escape asc desc limit offset group having join on left inner cross union all cast blob text integer case
  when then else end into values insert replace ignore`.split(/\s+/));

/**
 * What `sql` names that `tables` lacks: unknown tables, and columns of none
 * of the tables it reads (a column qualified by a table or alias: not of
 * that table).
 */
function unknownNames(sql, tables) {
  const schema = new Map([...BUILTIN, ...tables]);
  const tokens = plain(sql).replace(/:[a-z]+\b/g, "''").match(/[A-Za-z_][A-Za-z0-9_]*|'[^']*'|\S/g) ?? [];
  const lower = tokens.map((t) => t.toLowerCase());
  const problems = [];
  const scope = new Map(); // table or alias → table
  const skip = new Set();
  // The tables it names, and their aliases.
  for (let i = 0; i < tokens.length; i++) {
    if (!['from', 'join', 'into', 'update'].includes(lower[i]) || !/^\w/.test(tokens[i + 1] ?? '')) continue;
    const table = tokens[i + 1];
    skip.add(i + 1);
    if (!schema.has(table)) problems.push(`table ${table}`);
    scope.set(table, table);
    const alias = tokens[i + 2];
    if (alias && /^\w/.test(alias) && !KEYWORDS.has(alias.toLowerCase())) {
      scope.set(alias, table);
      skip.add(i + 2);
    }
  }
  const columnsOf = (t) => schema.get(t) ?? new Set();
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (skip.has(i) || !/^[A-Za-z_]/.test(t) || KEYWORDS.has(lower[i])) continue;
    if (tokens[i + 1] === '(') continue; // a function
    if (lower[i - 1] === 'as') continue; // a name for a result
    if (tokens[i + 1] === '.') {
      const table = scope.get(t);
      const column = tokens[i + 2];
      if (!table) problems.push(`table or alias ${t}`);
      else if (!columnsOf(table).has(column)) problems.push(`column ${t}.${column} (${table})`);
      i += 2;
      continue;
    }
    if (![...scope.values()].some((table) => columnsOf(table).has(t))) {
      problems.push(`column ${t} (of none of ${[...new Set(scope.values())].join(', ') || 'no table'})`);
    }
  }
  return problems;
}

const schema = schemaOf(MIGRATIONS);

test('the migrations read as the tables the Worker keeps', () => {
  // A few of what the check reads, so that a change in how the migrations
  // are read shows here first.
  assert.ok(schema.get('packets').has('findings_kept'), 'ALTER TABLE … ADD COLUMN is read');
  assert.ok(schema.get('pushes').has('owner'), 'a later migration is read after an earlier one');
  assert.ok(!schema.has('members'), 'DROP TABLE is read');
  assert.ok(schema.get('chunks').has('offset') && !schema.get('labels').has('PRIMARY'), 'table constraints are not columns');
});

test('every table and column the store queries name is in the migrations', () => {
  const queries = allQueries();
  assert.ok(Object.keys(queries).length >= Object.keys(SQL).length + 3);
  for (const [name, sql] of Object.entries(queries)) {
    assert.deepEqual(unknownNames(sql, schema), [], `${name}: ${sql}`);
  }
  for (const t of TABLES) assert.ok(schema.has(t), `${t} is a table`);
  for (const [t, column] of Object.entries(ABOUT)) assert.ok(schema.get(t).has(column), `${t}.${column}`);
  for (const [t, columns] of Object.entries(STORED)) {
    assert.deepEqual(columns.filter((c) => !schema.get(t).has(c)), [], `the stored columns of ${t}`);
  }
});

test('a name the migrations do not make is found', () => {
  assert.deepEqual(unknownNames('SELECT digets FROM packets', schema), ['column digets (of none of packets)']);
  assert.deepEqual(unknownNames('SELECT count(*) AS n FROM packet WHERE digest = :digest', schema),
    ['table packet', 'column digest (of none of packet)']);
  assert.deepEqual(unknownNames('SELECT key FROM packs p WHERE p.unused = 0', schema), ['column p.unused (packs)']);
  assert.deepEqual(unknownNames('SELECT path FROM members', schema), ['table members', 'column path (of none of members)']);
  assert.deepEqual(unknownNames("SELECT key FROM packs WHERE key IN (SELECT pack FROM pack_users WHERE onwer = 'x')", schema),
    ['column onwer (of none of packs, pack_users)']);
  assert.deepEqual(unknownNames(SQL.objectsOf, schema), []);
});

test('values of another shape are refused, never put into SQL', () => {
  const digest = `sha256:${'a'.repeat(64)}`;
  assert.equal(bind(SQL.packetStorage, { digest }), `SELECT storage FROM packets WHERE digest = '${digest}'`);
  assert.equal(bind(SQL.packsAmong, { keys: [`packs/${'1'.repeat(32)}`, `uploads/${'2'.repeat(32)}`] }),
    `SELECT key FROM packs WHERE key IN ('packs/${'1'.repeat(32)}', 'uploads/${'2'.repeat(32)}')`);
  assert.equal(bind(SQL.partRecord, { id: 'f'.repeat(32), number: 1 }),
    `SELECT record FROM push_parts WHERE push_id = '${'f'.repeat(32)}' AND number = 1`);
  const refused = [
    [SQL.packetStorage, { digest: `${digest}' OR '1'='1` }],
    [SQL.packetStorage, { digest: digest.toUpperCase() }],
    [SQL.packetStorage, {}],
    [SQL.packsAmong, { keys: [] }],
    [SQL.packsAmong, { keys: ['packs/../x'] }],
    [SQL.refCount, { ref: "sessions/x'; DROP TABLE refs; --" }],
    [SQL.refCount, { ref: 'sessions//latest' }],
    [SQL.refsOutside, { prefix: 'sessions/x%' }],
    [SQL.partRecord, { id: 'f'.repeat(32), number: '1 OR 1' }],
    [SQL.uploadCounts, { id: 'not-an-id' }],
  ];
  for (const [sql, values] of refused) assert.throws(() => bind(sql, values), /store query/, JSON.stringify(values));
  assert.throws(() => tableCountsSql(['packets', 'members']), /not one of/);
  assert.throws(() => tableCountsSql({ 'n; --': 'packets' }), /store query/);
  assert.throws(() => countsAboutSql('sha256:x', ['packets']), /store query/);
  assert.throws(() => packetCount({ d1: () => assert.fail('asked') }, 'x'), /store query/);
});
