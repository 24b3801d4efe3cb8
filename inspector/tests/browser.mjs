// Debian's headless Chromium driven by playwright-core (no downloaded
// browser), and helpers shared by the end-to-end tests.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';

export const HERE = path.dirname(new URL(import.meta.url).pathname);
export const OUT = path.join(HERE, 'out');
export const PACKETS = path.join(OUT, 'packets');
export const SCREENSHOTS = path.join(OUT, 'screenshots');

// playwright-core gives every launch a fresh temporary profile (the
// --user-data-dir the toolchain notes ask for).
export async function launch() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
    timeout: 30_000,
  });
  return {
    browser,
    close: () => browser.close(),
  };
}

// A page that fails the test on any console error, page error or request
// that leaves 127.0.0.1.
export async function openPage(browser, url, { colorScheme = 'light' } = {}) {
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 }, colorScheme });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (!['127.0.0.1'].includes(u.hostname) && !['blob:', 'data:'].includes(u.protocol)) problems.push(`external request: ${r.url()}`);
  });
  await page.goto(url);
  await page.waitForSelector('html[data-ready=true]', { timeout: 15_000 });
  return { page, context, problems };
}

export async function screenshot(page, name) {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  const file = path.join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

export const packet = (name) => path.join(PACKETS, name);
