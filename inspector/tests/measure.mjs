// Measures, in headless Chromium: page load (navigation start to the
// verification worker's wasm being ready) and verification throughput for
// a large packet (default inspector/tests/out/packets/big-100.packet, made with
// `cargo run --release -p packet-inspector-wasm --example fixtures -- inspector/tests/out/packets --big 100`).
//
//   node inspector/tests/measure.mjs [PACKET] [--json]     (RUNS=3 by default)
//
// --json prints one JSON object instead (bench/run.py reads it).
import fs from 'node:fs';
import path from 'node:path';
import { serve } from './server.mjs';
import { HERE, launch, openPage, packet } from './browser.mjs';

const args = process.argv.slice(2);
const json = args.includes('--json');
const file = args.find((a) => a !== '--json') ?? packet('big-100.packet');
const runs = Number(process.env.RUNS ?? 3);
const size = fs.statSync(file).size;
const server = await serve(path.join(HERE, '..', 'dist'));
const chromium = await launch();
const loads = [];
const rates = [];
const times = [];
try {
  for (let i = 0; i < runs; i++) {
    const { page, context } = await openPage(chromium.browser, server.url);
    const t = await page.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0];
      const ready = performance.getEntriesByName('inspector-ready')[0];
      return { interactive: nav.domInteractive, loaded: nav.loadEventEnd, ready: ready.startTime };
    });
    loads.push(t);
    await page.setInputFiles('#file-a', file);
    await page.waitForSelector('#banner[data-verdict]', { timeout: 300_000 });
    const verdict = await page.getAttribute('#banner', 'data-verdict');
    if (verdict !== 'verified') throw new Error(`the packet was ${verdict}`);
    const seconds = Number(await page.getAttribute('#banner', 'data-seconds'));
    rates.push(size / 1e6 / seconds);
    times.push(seconds);
    await context.close();
  }
} finally {
  await chromium.close();
  await server.close();
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
if (json) {
  console.log(JSON.stringify({
    packet: file, size, runs,
    loads_ms: loads, verify_s: times, mb_per_s: rates,
    median: {
      interactive_ms: median(loads.map((l) => l.interactive)),
      loaded_ms: median(loads.map((l) => l.loaded)),
      ready_ms: median(loads.map((l) => l.ready)),
      mb_per_s: median(rates),
    },
  }, null, 1));
  process.exit(0);
}
console.log(`packet: ${path.basename(file)}, ${(size / 1e6).toFixed(1)} MB, ${runs} runs`);
console.log(`page load: DOM interactive ${median(loads.map((l) => l.interactive)).toFixed(0)} ms, load event ${median(loads.map((l) => l.loaded)).toFixed(0)} ms, wasm worker ready ${median(loads.map((l) => l.ready)).toFixed(0)} ms (medians)`);
console.log(`verification: ${rates.map((r) => r.toFixed(0)).join(', ')} MB/s (median ${median(rates).toFixed(0)} MB/s)`);
