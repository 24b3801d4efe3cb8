import { serve } from './server.mjs';
import { launch, openPage, packet } from './browser.mjs';
const dirs = { parallel: '/work/main/inspector/dist', single: '/tmp/dist-single' };
const servers = {}; for (const [k, d] of Object.entries(dirs)) servers[k] = await serve(d);
const c = await launch();
const res = { parallel: [], single: [] };
for (let i = 0; i < 4; i++) for (const k of ['parallel', 'single']) {
  const { page, context } = await openPage(c.browser, servers[k].url);
  await page.setInputFiles('#file-a', packet('big-100.packet'));
  await page.waitForSelector('#banner[data-verdict]', { timeout: 300000 });
  res[k].push((100 / Number(await page.getAttribute('#banner', 'data-seconds'))).toFixed(0));
  await context.close();
}
console.log(res);
await c.close(); for (const s of Object.values(servers)) await s.close();
