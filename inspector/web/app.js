// The page: moves a File's (or an edge response's) chunks into the
// verification worker and draws what comes out. No format logic here: every
// verdict, offset, digest and diff comes from packet-core via the worker.
import { resolve, sourceFor } from './edge.js';

const $ = (id) => document.getElementById(id);
const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });

const state = {
  a: null,          // { id, name, report }
  b: null,
  opening: null,    // id being verified for slot A
  openingB: null,   // id being verified for slot B
  selected: null,   // member path shown in the preview
  expanded: new Set(),
  filter: '',
  sort: 'name',
  tree: null,       // { nodes: Map(path -> node), roots: [node] }
  rows: [],         // visible rows, in order
  focusPath: null,
  previewUrl: null,
};

let nextId = 1;
let nextRequest = 1;
const pending = new Map(); // request -> { resolve, reject }
const progressHandlers = new Map(); // session id -> { onProgress, resolve }

worker.onmessage = ({ data }) => {
  if (data.type === 'ready') {
    performance.mark('inspector-ready');
    document.documentElement.dataset.ready = 'true';
    return;
  }
  if (data.type === 'progress') { progressHandlers.get(data.id)?.onProgress(data); return; }
  if (data.type === 'error' && data.id === undefined && data.request === undefined) {
    // The wasm module could not be loaded: nothing can be verified.
    document.documentElement.dataset.ready = 'failed';
    $('drop-a').append(el('p', { class: 'error-box', role: 'alert', text: `The verifier could not start: ${data.error.message}` }));
    return;
  }
  if (data.type === 'verified' || data.type === 'refused' || data.type === 'cancelled') {
    const h = progressHandlers.get(data.id);
    progressHandlers.delete(data.id);
    h?.resolve(data);
    return;
  }
  if (data.type === 'error' && !data.request && progressHandlers.has(data.id)) {
    const h = progressHandlers.get(data.id);
    progressHandlers.delete(data.id);
    h.resolve({ type: 'refused', id: data.id, refusal: data.error });
    return;
  }
  const p = pending.get(data.request);
  if (!p) return;
  pending.delete(data.request);
  if (data.type === 'error') p.reject(data.error); else p.resolve(data);
};

function ask(message) {
  const request = nextRequest++;
  return new Promise((resolve, reject) => {
    pending.set(request, { resolve, reject });
    worker.postMessage({ ...message, request });
  });
}

// A verification that finished after it was superseded: free its packet.
function discard(outcome) {
  if (outcome.type === 'verified') worker.postMessage({ type: 'close', id: outcome.id });
}

function verify(source, onProgress, expectedDigest = null) {
  const id = nextId++;
  return {
    id,
    done: new Promise((resolve) => {
      progressHandlers.set(id, { onProgress, resolve });
      worker.postMessage({ type: 'open', id, source, expectedDigest });
    }),
  };
}

// ---------- formatting ----------

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB'];
function formatBytes(n) {
  let i = 0;
  let v = n;
  while (v >= 1024 && i < BYTE_UNITS.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${n} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${BYTE_UNITS[i]}`;
}
const exact = (n) => `${n.toLocaleString('en-US')} bytes`;
const plural = (n, one, many = `${one}s`) => `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;
function signedBytes(n) { return n === 0 ? '0 B' : (n > 0 ? '+' : '−') + formatBytes(Math.abs(n)); }

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k === 'text') node.textContent = v;
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) if (c != null) node.append(c);
  return node;
}

// ---------- opening ----------

function showOnly(which) {
  $('empty').hidden = which !== 'empty';
  $('progress-panel').hidden = which !== 'progress';
  $('result').hidden = which !== 'result';
}

// Forgets the open packets (and any verification in flight).
function resetA() {
  if (state.opening) worker.postMessage({ type: 'cancel', id: state.opening });
  state.opening = null;
  for (const slot of ['a', 'b']) if (state[slot]) worker.postMessage({ type: 'close', id: state[slot].id });
  state.a = null;
  state.b = null;
  clearPreview();
  clearCompare();
}

async function openA(source, name, expectedDigest = null) {
  resetA();
  showOnly('progress');
  $('progress-name').textContent = name;
  $('progress').value = 0;
  $('progress-text').textContent = 'Starting…';
  const { id, done } = verify(source, (p) => drawProgress(p), expectedDigest);
  state.opening = id;
  const outcome = await done;
  if (state.opening !== id) { discard(outcome); return; }
  state.opening = null;
  showOnly('result');
  selectTab('inspect');
  if (outcome.type === 'verified') {
    state.a = { id, name, report: outcome.report, seconds: outcome.seconds };
    drawVerified(state.a);
  } else {
    drawRefused(name, outcome.refusal, source);
  }
}

function drawProgress({ progress, total }) {
  const pct = total ? Math.min(100, (progress.offset / total) * 100) : null;
  if (pct == null) $('progress').removeAttribute('value'); else $('progress').value = pct;
  const parts = [total ? `${formatBytes(progress.offset)} of ${formatBytes(total)}` : formatBytes(progress.offset)];
  if (progress.membersTotal != null) parts.push(`${progress.membersVerified} of ${progress.membersTotal} members verified`);
  if (progress.current) parts.push(progress.current);
  $('progress-text').textContent = parts.join(' · ');
}

$('cancel').addEventListener('click', () => {
  if (state.opening) worker.postMessage({ type: 'cancel', id: state.opening });
  state.opening = null;
  showOnly('empty');
});

$('file-a').addEventListener('change', (e) => {
  const file = e.target.files[0];
  if (file) openA({ kind: 'file', file }, file.name);
  e.target.value = '';
});

// Opens a packet from the edge: a ref is resolved to a digest first, and the
// packet streamed must hash to that digest.
async function openEdge(input, open) {
  const text = input.trim();
  if (!text) return;
  let digest;
  try {
    ({ digest } = await resolve(text));
  } catch (refusal) {
    if (open === openA) {
      resetA();
      showOnly('result');
      drawRefused(text, refusal, { kind: 'url' });
    } else {
      drawRefusedB(text, refusal);
    }
    return;
  }
  open(sourceFor(digest), text === digest ? digest : `${text} (${digest.slice(0, 15)}…)`, digest);
}

$('edge-form-a').addEventListener('submit', (e) => {
  e.preventDefault();
  openEdge($('edge-a').value, openA);
});

// `?open=<digest or ref>` opens a packet from the edge as the page loads
// (links printed by tools point here).
const requested = new URLSearchParams(location.search).get('open');
if (requested) {
  $('edge-a').value = requested;
  openEdge(requested, openA);
}

// "/" jumps to the path filter, as in many code browsers.
document.addEventListener('keydown', (e) => {
  if (e.key !== '/' || e.target.closest('input, textarea, select') || $('panel-inspect').hidden || !state.tree) return;
  e.preventDefault();
  $('filter').focus();
});

// Drag and drop anywhere on the page: onto the compare panel opens packet B.
let dragDepth = 0;
window.addEventListener('dragenter', (e) => { if (hasFiles(e)) { dragDepth++; $('drop-overlay').hidden = false; } });
window.addEventListener('dragleave', () => { if (--dragDepth <= 0) { dragDepth = 0; $('drop-overlay').hidden = true; } });
window.addEventListener('dragover', (e) => { if (hasFiles(e)) e.preventDefault(); });
window.addEventListener('drop', (e) => {
  e.preventDefault();
  dragDepth = 0;
  $('drop-overlay').hidden = true;
  const file = e.dataTransfer?.files?.[0];
  if (!file) return;
  if (!$('panel-compare').hidden && state.a) openB({ kind: 'file', file }, file.name);
  else openA({ kind: 'file', file }, file.name);
});
function hasFiles(e) { return [...(e.dataTransfer?.types || [])].includes('Files'); }

// ---------- verdict ----------

function drawVerified({ name, report, seconds }) {
  const banner = $('banner');
  banner.className = 'banner ok';
  banner.dataset.verdict = 'verified';
  banner.dataset.seconds = String(seconds);
  const rate = seconds > 0 && report.size > 8e6 ? ` in ${seconds.toFixed(2)} s (${(report.size / 1e6 / seconds).toFixed(0)} MB/s)` : '';
  banner.replaceChildren(
    el('span', { class: 'badge', text: 'Verified' }),
    el('div', { class: 'body' },
      el('div', { class: 'title', text: `${name}: every header, member and digest checked` }),
      el('div', { class: 'muted small', text: `${report.format} · verified by packet-core in this browser${rate}` })),
  );
  drawSummary(report);
  state.expanded = new Set(report.members.filter((m) => m.type === 'dir' && !m.path.includes('/')).map((m) => m.path));
  state.tree = buildTree(report.members);
  state.focusPath = null;
  $('filter').value = state.filter = '';
  $('result').querySelector('#panel-inspect').hidden = false;
  drawTree();
}

// The code the wasm side throws for a call it rules out: a bug in this
// page, which says nothing about the packet.
const BUG = 'bug';

function drawRefused(name, refusal, source) {
  state.tree = null;
  const bug = refusal.code === BUG;
  const banner = $('banner');
  banner.className = 'banner bad';
  banner.dataset.verdict = bug ? 'bug' : 'refused';
  banner.dataset.code = refusal.code;
  const rows = [
    ['Code', el('code', { class: 'mono', 'data-field': 'code', text: refusal.code })],
    ['Failing', refusal.path
      ? el('code', { class: 'failing', 'data-field': 'path', text: refusal.path })
      : el('span', { 'data-field': 'path', text: refusal.offset != null ? 'a header or the archive structure' : 'the packet as a whole' })],
    ['At byte', refusal.offset != null ? refusal.offset.toLocaleString('en-US') : '—'],
    ['Found', refusal.message],
    ['What to do', refusal.advice],
  ];
  if (source.kind === 'file') rows.push(['File', `${source.file.name}, ${exact(source.file.size)} on disk`]);
  banner.replaceChildren(
    el('span', { class: 'badge', text: bug ? 'Bug' : 'Refused' }),
    el('div', { class: 'body' },
      el('div', { class: 'title', text: bug
        ? `The inspector failed while reading ${name}: this is a bug in the page, not a verdict on the packet. Nothing from it is shown.`
        : `${name} is not a valid session packet. Nothing from it is shown.` }),
      el('dl', {}, rows.map(([k, v]) => [el('dt', { text: k }), el('dd', {}, v)]))),
  );
  // Nothing from a refused packet is trustworthy: no summary, tree or preview.
  document.querySelector('[role=tablist]').hidden = true;
  $('summary').replaceChildren();
  $('tree').replaceChildren();
  $('tree-note').textContent = '';
  $('panel-inspect').hidden = true;
  $('tab-compare').disabled = true;
  $('tab-inspect').disabled = true;
}

function drawSummary(report) {
  document.querySelector('[role=tablist]').hidden = false;
  $('tab-compare').disabled = false;
  $('tab-inspect').disabled = false;
  const t = report.totals;
  const h = report.harness;
  const items = [
    ['Digest', el('code', { class: 'mono', 'data-field': 'digest', text: report.digest ?? '—' }), 'wide'],
    ['Size', el('span', { title: exact(report.size), text: formatBytes(report.size) })],
    ['Members', el('span', { 'data-field': 'members', text: `${t.members.toLocaleString('en-US')}` })],
    ['Contents', [plural(t.files, 'file'), plural(t.directories, 'directory', 'directories'), plural(t.symlinks, 'symlink')].join(' · ')],
    ['File bytes', el('span', { title: exact(t.bytes), text: formatBytes(t.bytes) })],
    ['Harness', h ? h.kind : 'none (workspace only)'],
  ];
  if (h) {
    items.push(['Thread id', el('code', { class: 'mono', text: h.threadId })]);
    items.push(['Model', h.model ?? 'not recorded']);
    items.push(['Session log', el('code', { class: 'mono', text: h.rollout })]);
  }
  items.push(['Exclusions', report.exclusions.length === 0
    ? 'none applied'
    : el('table', { class: 'exclusions' },
        el('tr', {}, el('th', { text: 'Rule' }), el('th', { text: 'Pattern' }), el('th', { text: 'Paths' })),
        report.exclusions.map((x) => el('tr', {}, el('td', { class: 'mono', text: x.rule }), el('td', { class: 'mono', text: x.pattern }), el('td', { text: String(x.matched) })))), 'wide']);
  items.push(['Findings', drawFindings(report.findings), 'wide']);
  $('summary').replaceChildren(...items.map(([k, v, cls]) => el('div', { class: cls }, el('dt', { text: k }), el('dd', {}, v))));
}

// What packet-core's reader found: secrets (rule and line, never a value)
// and git settings and hooks that would run programs where the packet is
// restored. A report: the packet verified.
function drawFindings(findings) {
  const rows = [
    ...findings.secrets.map((f) => ['secret', f.path, f.line, f.rule]),
    ...findings.git.map((f) => ['git', f.path, f.line, `${f.setting}: ${f.why}`]),
  ];
  if (rows.length === 0) return el('span', { 'data-field': 'findings', text: 'none found' });
  return el('table', { class: 'findings', 'data-field': 'findings' },
    el('tr', {}, el('th', { text: 'Kind' }), el('th', { text: 'Member' }), el('th', { text: 'Line' }), el('th', { text: 'What' })),
    rows.map(([kind, path, line, what]) => el('tr', { 'data-kind': kind },
      el('td', { text: kind }), el('td', { class: 'mono', text: path }),
      el('td', { text: line === null ? '—' : String(line) }), el('td', { class: 'mono', text: what }))));
}

// ---------- tree ----------

function buildTree(members) {
  const nodes = new Map();
  const roots = [];
  for (const m of members) {
    const node = { member: m, name: m.path.slice(m.path.lastIndexOf('/') + 1), children: [], total: m.size, parent: null };
    nodes.set(m.path, node);
    const cut = m.path.lastIndexOf('/');
    const parent = cut > 0 ? nodes.get(m.path.slice(0, cut)) : null;
    if (parent) { node.parent = parent; parent.children.push(node); } else roots.push(node);
  }
  // Members arrive in the format's order (parents first): sum sizes bottom-up.
  for (let i = members.length - 1; i >= 0; i--) {
    const node = nodes.get(members[i].path);
    if (node.parent) node.parent.total += node.total;
  }
  return { nodes, roots };
}

const MAX_ROWS = 5000;

function visibleRows() {
  const rows = [];
  const needle = state.filter.toLowerCase();
  const order = (list) => state.sort === 'size' ? [...list].sort((x, y) => y.total - x.total) : list;
  let matches = null;
  if (needle) {
    matches = new Set();
    for (const [path, node] of state.tree.nodes) {
      if (path.toLowerCase().includes(needle)) for (let n = node; n && !matches.has(n); n = n.parent) matches.add(n);
    }
  }
  const walk = (list, level) => {
    for (const node of order(list)) {
      if (rows.length >= MAX_ROWS) return;
      if (matches && !matches.has(node)) continue;
      const open = matches ? true : state.expanded.has(node.member.path);
      rows.push({ node, level, open, setsize: list.length });
      if (node.children.length && open) walk(node.children, level + 1);
    }
  };
  walk(state.tree.roots, 1);
  return { rows, truncated: rows.length >= MAX_ROWS, matched: matches ? matches.size : null };
}

function highlight(text, needle) {
  if (!needle) return text;
  const i = text.toLowerCase().indexOf(needle.toLowerCase());
  if (i < 0) return text;
  return [text.slice(0, i), el('mark', { text: text.slice(i, i + needle.length) }), text.slice(i + needle.length)];
}

const ICONS = { dir: '▸', file: '·', symlink: '↪' };

function drawTree() {
  if (!state.tree) return;
  const { rows, truncated, matched } = visibleRows();
  state.rows = rows;
  if (!rows.some((r) => r.node.member.path === state.focusPath)) state.focusPath = rows[0]?.node.member.path ?? null;
  const frag = document.createDocumentFragment();
  rows.forEach(({ node, level, open }, i) => {
    const m = node.member;
    const isDir = m.type === 'dir';
    const row = el('div', {
      class: 'tree-row', role: 'treeitem', id: `node-${m.index}`,
      'aria-level': level, 'aria-expanded': isDir && node.children.length ? String(open) : null,
      'aria-selected': String(state.selected === m.path), tabindex: m.path === state.focusPath ? '0' : '-1',
      'data-path': m.path, 'data-type': m.type, 'data-row': i,
      'aria-label': `${node.name}, ${m.type === 'file' ? formatBytes(m.size) : m.type}${m.type === 'symlink' ? ' to ' + m.target : ''}`,
    },
      el('span', { class: 'name', style: null },
        el('span', { class: 'twisty', 'aria-hidden': 'true', text: isDir && node.children.length ? (open ? '▾' : '▸') : '' }),
        el('span', { class: 'icon', 'aria-hidden': 'true', text: isDir ? '' : ICONS[m.type] }),
        el('span', { class: 'label', title: m.path }, highlight(node.name, state.filter)),
        m.type === 'symlink' ? el('span', { class: 'target', 'data-field': 'target', text: `→ ${m.target}` }) : null),
      el('span', { class: 'size', title: isDir ? `${exact(node.total)} below` : exact(m.size), text: m.type === 'symlink' ? '' : formatBytes(isDir ? node.total : m.size) }),
      el('span', { class: 'mode', text: m.mode }),
      el('span', { class: 'hash', title: m.sha256 ? `sha256:${m.sha256}` : '', text: m.sha256 ? m.sha256.slice(0, 8) : '' }));
    row.firstChild.style.paddingLeft = `${(level - 1) * 14}px`;
    frag.append(row);
  });
  $('tree').replaceChildren(frag);
  const notes = [];
  if (matched != null) notes.push(`${rows.length} rows for “${state.filter}”: the matches and the directories above them`);
  if (truncated) notes.push(`showing the first ${MAX_ROWS} rows: refine the filter to see more`);
  $('tree-note').textContent = notes.join(' · ');
}

function focusRow(path) {
  state.focusPath = path;
  const rows = $('tree').querySelectorAll('[role=treeitem]');
  for (const r of rows) r.tabIndex = r.dataset.path === path ? 0 : -1;
  const target = [...rows].find((r) => r.dataset.path === path);
  target?.focus();
  target?.scrollIntoView({ block: 'nearest' });
}

function toggle(path, open) {
  if (open) state.expanded.add(path); else state.expanded.delete(path);
  drawTree();
  focusRow(path);
}

$('tree').addEventListener('click', (e) => {
  const row = e.target.closest('[role=treeitem]');
  if (!row) return;
  const path = row.dataset.path;
  const node = state.tree.nodes.get(path);
  if (row.dataset.type === 'dir' && node.children.length && !state.filter) toggle(path, !state.expanded.has(path));
  focusRow(path);
  select(path);
});

$('tree').addEventListener('keydown', (e) => {
  const row = e.target.closest('[role=treeitem]');
  if (!row) return;
  const i = Number(row.dataset.row);
  const { node, open } = state.rows[i];
  const path = node.member.path;
  const go = (j) => { const r = state.rows[Math.max(0, Math.min(state.rows.length - 1, j))]; if (r) focusRow(r.node.member.path); };
  switch (e.key) {
    case 'ArrowDown': go(i + 1); break;
    case 'ArrowUp': go(i - 1); break;
    case 'Home': go(0); break;
    case 'End': go(state.rows.length - 1); break;
    case 'ArrowRight':
      if (node.children.length && !open) toggle(path, true);
      else if (node.children.length) go(i + 1);
      break;
    case 'ArrowLeft':
      if (node.children.length && open && !state.filter) toggle(path, false);
      else if (node.parent) focusRow(node.parent.member.path);
      break;
    case 'Enter': case ' ':
      if (node.children.length && !state.filter) toggle(path, !open);
      select(path);
      break;
    default: return;
  }
  e.preventDefault();
});

// Filtering walks every path: wait for a pause in typing on large packets.
let filterTimer = 0;
$('filter').addEventListener('input', (e) => {
  clearTimeout(filterTimer);
  const apply = () => { state.filter = e.target.value.trim(); drawTree(); };
  if (state.tree.nodes.size > 5000) filterTimer = setTimeout(apply, 150); else apply();
});
$('sort').addEventListener('change', (e) => { state.sort = e.target.value; drawTree(); });
$('expand-all').addEventListener('click', () => {
  for (const [path, node] of state.tree.nodes) if (node.children.length) state.expanded.add(path);
  drawTree();
});
$('collapse-all').addEventListener('click', () => { state.expanded.clear(); drawTree(); });

// ---------- preview ----------

const TEXT_LIMIT = 512 << 10;
const LINE_LIMIT = 10000;
const HEX_HEAD = 512;

function clearPreview() {
  if (state.previewUrl) URL.revokeObjectURL(state.previewUrl);
  state.previewUrl = null;
  state.selected = null;
  $('preview-actions').replaceChildren();
  $('preview').replaceChildren(el('p', { class: 'muted', text: 'Select a member to see it. Each file is read back and re-hashed against the manifest before it is shown.' }));
}

function metaList(m, extra = []) {
  const rows = [['Path', el('code', { class: 'mono', text: m.path })], ['Type', m.type], ['Mode', el('code', { class: 'mono', text: m.mode })]];
  if (m.type === 'file') {
    rows.push(['Size', `${formatBytes(m.size)} (${exact(m.size)})`]);
    rows.push(['sha256', el('code', { class: 'mono', 'data-field': 'sha256', text: m.sha256 })]);
  }
  if (m.type === 'symlink') rows.push(['Target', el('code', { class: 'mono', 'data-field': 'target', text: m.target })]);
  rows.push(...extra);
  return el('dl', { class: 'meta' }, rows.map(([k, v]) => [el('dt', { text: k }), el('dd', {}, v)]));
}

async function select(path) {
  if (!state.a || state.selected === path) return;
  clearPreview();
  state.selected = path;
  for (const r of $('tree').querySelectorAll('[role=treeitem]')) r.setAttribute('aria-selected', String(r.dataset.path === path));
  const node = state.tree.nodes.get(path);
  const m = node.member;
  $('preview-title').textContent = node.name;
  if (m.type === 'dir') {
    $('preview').replaceChildren(metaList(m, [['Contents', `${node.children.length} entries, ${formatBytes(node.total)} of files below`]]));
    return;
  }
  if (m.type === 'symlink') {
    $('preview').replaceChildren(metaList(m, [['Note', 'a symlink has no body; its target stays inside its root (checked by packet-core)']]));
    return;
  }
  $('preview').replaceChildren(metaList(m), el('p', { class: 'muted', text: 'Reading back and re-hashing…' }));
  let answer;
  try {
    answer = await ask({ type: 'member', id: state.a.id, index: m.index });
  } catch (refusal) {
    if (state.selected !== path) return;
    $('preview').replaceChildren(metaList(m), refusalBox(refusal, 'The member could not be read back intact, so it is not shown.'));
    return;
  }
  if (state.selected !== path) return;
  drawMember(m, answer.kind, new Uint8Array(answer.head), answer.blob);
}

function refusalBox(r, lead) {
  return el('div', { class: 'error-box', role: 'alert', 'data-code': r.code },
    el('strong', { text: r.code === BUG ? 'This is a bug in the inspector page, not a verdict on the packet.' : lead }), el('br'),
    el('code', { class: 'mono', text: r.code }), ` ${r.path ? `at ${r.path}: ` : ''}${r.message}`, el('br'),
    el('span', { class: 'muted', text: r.advice }));
}

// `head` is the start of the body (all of it when small), `blob` the whole
// body: both were re-hashed against the manifest in the worker.
function drawMember(m, kind, bytes, whole) {
  const name = m.path.slice(m.path.lastIndexOf('/') + 1);
  const blob = new Blob([whole], { type: kind.startsWith('image/') ? kind : 'application/octet-stream' });
  state.previewUrl = URL.createObjectURL(blob);
  $('preview-actions').replaceChildren(el('a', { class: 'button small', href: state.previewUrl, download: name, id: 'download', text: 'Download' }));
  const checked = el('span', { class: 'checked', 'data-field': 'checked', text: '✓ read back and matches the manifest sha256' });
  const body = [];
  if (kind === 'text') body.push(textView(bytes, m.size));
  else if (kind.startsWith('image/')) body.push(el('img', { src: state.previewUrl, alt: `Image ${m.path}` }));
  else body.push(el('p', { class: 'muted', text: `Binary file, ${formatBytes(m.size)}. First ${Math.min(HEX_HEAD, bytes.length)} bytes:` }), hexView(bytes.subarray(0, HEX_HEAD)));
  $('preview').replaceChildren(metaList(m, [['Check', checked], ['Shown as', kind]]), ...body);
}

function textView(bytes, size) {
  const cut = bytes.length > TEXT_LIMIT || size > bytes.length;
  const text = new TextDecoder('utf-8').decode(cut ? bytes.subarray(0, TEXT_LIMIT) : bytes);
  let lines = text.split('\n');
  if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
  const more = lines.length > LINE_LIMIT || cut;
  lines = lines.slice(0, LINE_LIMIT);
  const pre = el('pre', { class: 'code', 'aria-label': 'File contents with line numbers', tabindex: '0', id: 'text-preview' },
    lines.map((line, i) => el('div', { class: 'ln' }, el('span', { text: String(i + 1) }), el('span', { text: line.replace(/\r$/, '') }))));
  return more ? [pre, el('p', { class: 'muted small', text: `Only the first ${lines.length} lines are shown; download the file to see all of it.` })] : pre;
}

function hexView(bytes) {
  const out = [];
  for (let at = 0; at < bytes.length; at += 16) {
    const row = bytes.subarray(at, at + 16);
    const hex = [...row].map((b) => b.toString(16).padStart(2, '0')).join(' ').padEnd(47, ' ');
    const ascii = [...row].map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
    out.push(`${at.toString(16).padStart(8, '0')}  ${hex}  ${ascii}`);
  }
  return el('pre', { class: 'code hex', tabindex: '0', 'aria-label': 'Hex dump of the first bytes', text: out.join('\n') });
}

// ---------- tabs ----------

function selectTab(which) {
  for (const [tab, panel] of [['tab-inspect', 'panel-inspect'], ['tab-compare', 'panel-compare']]) {
    const on = tab === `tab-${which}`;
    $(tab).setAttribute('aria-selected', String(on));
    $(tab).tabIndex = on ? 0 : -1;
    $(panel).hidden = !on;
  }
}
$('tab-inspect').addEventListener('click', () => selectTab('inspect'));
$('tab-compare').addEventListener('click', () => selectTab('compare'));
document.querySelector('[role=tablist]').addEventListener('keydown', (e) => {
  if (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight') return;
  const next = $('tab-inspect').getAttribute('aria-selected') === 'true' ? 'compare' : 'inspect';
  if ($(`tab-${next}`).disabled) return;
  selectTab(next);
  $(`tab-${next}`).focus();
});

// ---------- compare ----------

function clearCompare() {
  $('compare-status').replaceChildren();
  $('compare-result').hidden = true;
  $('diff-panel').hidden = true;
  $('changes').replaceChildren();
}

async function openB(source, name, expectedDigest = null) {
  if (!state.a) return;
  if (state.openingB) worker.postMessage({ type: 'cancel', id: state.openingB });
  if (state.b) worker.postMessage({ type: 'close', id: state.b.id });
  state.b = null;
  clearCompare();
  const bar = el('progress', { max: '100', value: '0', 'aria-label': `Verifying ${name}` });
  const text = el('span', { class: 'muted small', text: 'Starting…' });
  $('compare-status').replaceChildren(el('p', {}, `Verifying ${name} `, bar, ' ', text));
  const { id, done } = verify(source, ({ progress, total }) => {
    if (total) bar.value = (progress.offset / total) * 100;
    text.textContent = `${formatBytes(progress.offset)}${total ? ' of ' + formatBytes(total) : ''}`;
  }, expectedDigest);
  state.openingB = id;
  const outcome = await done;
  if (state.openingB !== id) { discard(outcome); return; }
  state.openingB = null;
  if (outcome.type !== 'verified') {
    drawRefusedB(name, outcome.refusal);
    return;
  }
  state.b = { id, name, report: outcome.report };
  $('compare-status').replaceChildren(el('p', { class: 'checked', text: `✓ ${name} verified (${outcome.report.digest})` }));
  const { result } = await ask({ type: 'compare', a: state.a.id, b: id });
  drawComparison(result);
}

function drawRefusedB(name, r) {
    const bug = r.code === BUG;
    $('compare-status').replaceChildren(el('div', { class: 'banner bad', 'data-verdict': bug ? 'bug' : 'refused', 'data-code': r.code },
      el('span', { class: 'badge', text: bug ? 'Bug' : 'Refused' }),
      el('div', { class: 'body' },
        el('div', { class: 'title', text: bug
          ? `The inspector failed while reading ${name}: this is a bug in the page, not a verdict on the packet.`
          : `${name} is not a valid session packet; nothing from it is compared.` }),
        el('div', {}, el('code', { class: 'mono', text: r.code }), r.path ? [' at ', el('code', { class: 'failing', text: r.path })] : null, `: ${r.message}`),
        el('div', { class: 'muted small', text: r.advice }))));
}

$('file-b').addEventListener('change', (e) => {
  const file = e.target.files[0];
  if (file) openB({ kind: 'file', file }, file.name);
  e.target.value = '';
});
$('edge-form-b').addEventListener('submit', (e) => {
  e.preventDefault();
  openEdge($('edge-b').value, openB);
});

function sizeCell(n, m) { return n == null ? '' : m.type === 'file' ? formatBytes(n) : '—'; }
function deltaCell(n) {
  return el('td', { class: `num ${n > 0 ? 'delta-pos' : n < 0 ? 'delta-neg' : ''}`, text: signedBytes(n) });
}

function drawComparison(c) {
  $('compare-result').hidden = false;
  const same = c.added.length + c.removed.length + c.changed.length === 0;
  $('compare-summary').replaceChildren(
    el('span', { class: 'pill added', 'data-count': 'added', text: `${c.added.length} added` }),
    el('span', { class: 'pill removed', 'data-count': 'removed', text: `${c.removed.length} removed` }),
    el('span', { class: 'pill changed', 'data-count': 'changed', text: `${c.changed.length} changed` }),
    el('span', { class: 'muted', text: `${c.unchanged} unchanged · file bytes ${signedBytes(c.bytesDelta)}` }),
    el('span', { class: 'muted small mono', text: `A ${c.a.digest.slice(0, 19)}… → B ${c.b.digest.slice(0, 19)}…` }));
  if (same) { $('changes').replaceChildren(el('p', { class: 'muted', text: 'The two packets hold the same members.' })); return; }
  const row = (status, m, before, after, delta, what) => el('tr', { class: status, 'data-path': m.path, 'data-status': status },
    el('td', { class: 'status', text: status }),
    el('td', {}, status === 'changed' && m.type === 'file' && what.includes('content')
      ? el('button', { class: 'button small mono', type: 'button', 'data-diff': m.path, text: m.path, 'aria-label': `Show the diff of ${m.path}` })
      : el('code', { class: 'mono', text: m.path }),
      what?.length ? el('span', { class: 'muted small', text: ` (${what.join(', ')})` }) : null),
    el('td', { class: 'mono small', text: m.type }),
    el('td', { class: 'num', text: sizeCell(before, m) }),
    el('td', { class: 'num', text: sizeCell(after, m) }),
    deltaCell(delta));
  const tbody = el('tbody', {},
    c.added.map((m) => row('added', m, null, m.size, m.size)),
    c.removed.map((m) => row('removed', m, m.size, null, -m.size)),
    c.changed.map((x) => row('changed', x.after, x.before.size, x.after.size, x.sizeDelta, x.what)));
  $('changes').replaceChildren(el('table', { class: 'changes' },
    el('caption', { class: 'visually-hidden', text: 'Members added, removed or changed from A to B' }),
    el('thead', {}, el('tr', {}, ['Change', 'Path', 'Type', 'Size in A', 'Size in B', 'Delta'].map((h) => el('th', { scope: 'col', text: h })))),
    tbody));
}

$('changes').addEventListener('click', async (e) => {
  const path = e.target.closest('[data-diff]')?.dataset.diff;
  if (!path) return;
  $('diff-panel').hidden = false;
  $('diff-title').textContent = `Diff of ${path}`;
  $('diff').replaceChildren(el('p', { class: 'muted', text: 'Reading back both versions and re-hashing…' }));
  try {
    const { result, kinds } = await ask({ type: 'diff', a: state.a.id, b: state.b.id, path });
    $('diff').replaceChildren(drawDiff(result, kinds));
  } catch (r) {
    $('diff').replaceChildren(refusalBox(r, 'A version could not be read back intact.'));
  }
  $('diff-panel').scrollIntoView({ block: 'nearest' });
});

function drawDiff(d, kinds) {
  if (!d) return el('p', { class: 'muted', text: `Not a text file on both sides (${kinds.join(' → ')}): compare the sizes and digests above.` });
  if (d.tooLarge) return el('p', { class: 'muted', text: 'Too large for a line diff in the browser.' });
  const sign = { equal: ' ', delete: '−', insert: '+' };
  const cls = { equal: '', delete: 'del', insert: 'ins' };
  return el('div', { class: 'diff', id: 'diff-view' },
    el('p', { class: 'small' }, el('span', { class: 'delta-pos', text: `+${d.inserted}` }), ' ', el('span', { class: 'delta-neg', text: `−${d.deleted}` }), ' lines'),
    d.hunks.map((h) => el('pre', { class: 'code hunk', tabindex: '0' },
      h.lines.map((l) => el('div', { class: `ln ${cls[l.tag]}`, 'data-tag': l.tag },
        el('span', { text: l.old ?? '' }), el('span', { text: l.new ?? '' }), el('span', { text: sign[l.tag] }), el('span', { text: l.text }))))));
}
