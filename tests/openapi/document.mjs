// proto/openapi.yaml, read strictly: as every tool that loads the document
// must read it the same way, a key twice in one mapping and a node with no
// value at all are errors here rather than something a lenient parser
// fills in. The second is how an unquoted comma in a flow mapping goes
// wrong: in `{ description: a, b. }` the comma ends the value `a` and `b.`
// becomes a key of its own, with no value. (An explicit `null` is a value.)
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { LineCounter, isScalar, parseDocument, visit } from 'yaml';

export const ROOT = resolve(import.meta.dirname, '../..');
export const DOCUMENT = join(ROOT, 'proto/openapi.yaml');

/** `text` as one YAML document in plain values; throws on anything not strict. */
export function parseStrict(text, name = 'the document') {
  const lines = new LineCounter();
  const doc = parseDocument(text, { uniqueKeys: true, strict: true, prettyErrors: true, lineCounter: lines });
  const problems = [...doc.errors, ...doc.warnings].map((e) => e.message);
  const at = (node) => (node?.range ? `line ${lines.linePos(node.range[0]).line}` : 'somewhere');
  const empty = (node) => node === null || (isScalar(node) && node.value === null && node.source === '');
  visit(doc, {
    Pair(_, pair) {
      if (empty(pair.value)) problems.push(`no value after ${JSON.stringify(String(pair.key))} (${at(pair.key)})`);
    },
    Seq(_, seq) {
      for (const item of seq.items) if (empty(item)) problems.push(`an empty item in a sequence (${at(seq)})`);
    },
  });
  if (problems.length) {
    throw new Error(`${name} is not strict YAML (in a flow mapping, quote a text that holds a comma):\n${problems.join('\n')}`);
  }
  return doc.toJS();
}

/** The API document, parsed strictly. */
export function readDocument(path = DOCUMENT) {
  return parseStrict(readFileSync(path, 'utf8'), path);
}
