// A tiny static file server for the built page (inspector/dist), on
// 127.0.0.1 and a free port. Optionally forwards `/v1/...` to an edge
// Worker, so the page can open packets "from the edge" as when the Worker
// serves it; `onRequest(method, pathname)` sees every request;
// `corrupt(pathname)` lets a test flip one byte of a forwarded
// body, to play an edge (or a network) that cannot be trusted.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.png': 'image/png',
};

export function serve(root, { edge = null, corrupt = () => false, onRequest = () => {} } = {}) {
  const base = path.resolve(root);
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    onRequest(req.method, url.pathname);
    if (edge && (url.pathname === '/v1' || url.pathname.startsWith('/v1/'))) return forward(req, res, edge, corrupt(url.pathname));
    let file = path.join(base, decodeURIComponent(url.pathname));
    if (!file.startsWith(base + path.sep) && file !== base) { res.writeHead(403).end(); return; }
    if (file.endsWith(path.sep) || file === base) file = path.join(file, 'index.html');
    fs.stat(file, (err, stat) => {
      if (err || !stat.isFile()) { res.writeHead(404, { 'content-type': 'text/plain' }).end('not found'); return; }
      res.writeHead(200, {
        'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream',
        'content-length': stat.size,
        'cache-control': 'no-store',
      });
      if (req.method === 'HEAD') { res.end(); return; }
      fs.createReadStream(file).pipe(res);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      resolve({ url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => server.close(r)) });
    });
  });
}

function forward(req, res, edge, flip) {
  const target = new URL(req.url, edge);
  const upstream = http.request(target, { method: req.method, headers: { ...req.headers, host: target.host } }, (up) => {
    if (!flip) {
      res.writeHead(up.statusCode, up.headers);
      up.pipe(res);
      return;
    }
    const parts = [];
    up.on('data', (c) => parts.push(c));
    up.on('end', () => {
      const body = Buffer.concat(parts);
      if (body.length > 0) body[body.length >> 1] ^= 0x01;
      res.writeHead(up.statusCode, up.headers);
      res.end(body);
    });
  });
  upstream.on('error', (e) => { res.writeHead(502, { 'content-type': 'text/plain' }).end(String(e)); });
  req.pipe(upstream);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const root = process.argv[2] ?? path.join(path.dirname(new URL(import.meta.url).pathname), '../dist');
  const { url } = await serve(root, { edge: process.env.EDGE_URL ?? null });
  console.log(`serving ${root} at ${url}`);
}
