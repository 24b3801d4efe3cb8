// A recording proxy in front of the local Worker: it counts what each
// request carried and can drop the connection of chosen requests, so that
// the CLI's wire bytes, retries and resumes are checked against the real
// store. It runs in a process of its own (tests call the CLI with
// spawnSync, which blocks their event loop). startProxy(target) returns
// { url, log, fail, stop }:
//   log()              every request so far: { method, path, status, body_bytes,
//                      start and end (epoch ms: the request's arrival, the
//                      answer's last byte handed on), ms, timing (the
//                      answer's Pillbox-Timing header, with BENCH_ROUTES),
//                      cost (its Pillbox-Cost header, likewise) }
//   fail(suffix, n)    the next n requests whose path ends with `suffix`
//                      lose their connection once their body is read (the
//                      store never sees them)
// Run as `node tests/e2e/proxy.mjs TARGET`, it prints `listening on URL`;
// GET /__proxy/log and POST /__proxy/fail?suffix=…&times=… control it.
import { spawn } from 'node:child_process';
import { createServer, request as httpRequest } from 'node:http';
import { fileURLToPath } from 'node:url';

function serve(target) {
  const upstream = new URL(target);
  const entries = [];
  const failures = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://proxy');
    if (url.pathname === '/__proxy/log') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(entries));
      return;
    }
    if (url.pathname === '/__proxy/fail') {
      failures.push({ suffix: url.searchParams.get('suffix'), times: Number(url.searchParams.get('times') ?? 1) });
      res.writeHead(204);
      res.end();
      return;
    }
    const now = () => performance.timeOrigin + performance.now();
    const entry = { method: req.method, path: url.pathname, status: 0, body_bytes: 0, start: now(), end: 0, ms: 0, timing: null, cost: null };
    entries.push(entry);
    req.on('data', (d) => { entry.body_bytes += d.length; });
    const rule = failures.find((f) => f.times > 0 && url.pathname.endsWith(f.suffix));
    if (rule) {
      rule.times -= 1;
      entry.status = 'dropped';
      req.resume();
      req.on('end', () => req.socket.destroy());
      return;
    }
    // One upstream connection per request: the proxy adds no keep-alive of
    // its own between the client and the store.
    const forward = httpRequest({
      host: upstream.hostname, port: upstream.port, method: req.method, path: req.url,
      headers: req.headers, agent: false,
    }, (answer) => {
      entry.status = answer.statusCode;
      entry.timing = answer.headers['pillbox-timing'] ?? null;
      entry.cost = answer.headers['pillbox-cost'] ?? null;
      res.once('finish', () => { entry.end = now(); entry.ms = entry.end - entry.start; });
      res.writeHead(answer.statusCode, answer.rawHeaders);
      answer.pipe(res);
    });
    forward.on('error', () => req.socket.destroy());
    req.pipe(forward);
  });
  server.listen(0, '127.0.0.1', () => {
    console.log(`listening on http://127.0.0.1:${server.address().port}`);
  });
}

export async function startProxy(target) {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), target], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const url = await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`the proxy did not start:\n${out}`)), 10_000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) { clearTimeout(timer); ok(m[1]); }
    });
    child.stderr.on('data', (d) => { out += d; });
    child.once('exit', (code) => fail(new Error(`the proxy exited (${code}):\n${out}`)));
  });
  child.removeAllListeners('exit');
  // One connection per control request: a pooled one left idle while the
  // CLI runs would be closed by the proxy's idle timer under a later one.
  const control = (method, path) => new Promise((ok, fail) => {
    const req = httpRequest(url + path, { method, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('error', fail);
      res.on('end', () => ok({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', fail);
    req.end();
  });
  return {
    url,
    log: async () => JSON.parse((await control('GET', '/__proxy/log')).text),
    fail: async (suffix, times = 1) => {
      const r = await control('POST', `/__proxy/fail?suffix=${encodeURIComponent(suffix)}&times=${times}`);
      if (r.status !== 204) throw new Error(`proxy fail hook: ${r.status}`);
    },
    stop: () => new Promise((ok) => {
      if (child.exitCode !== null) { ok(); return; }
      child.once('exit', ok);
      child.kill('SIGTERM');
    }),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) serve(process.argv[2]);
