// bench/run ui's browser half (bench/ui_bench.py starts the server and the assembly): in
// Debian's headless Chromium, driven by playwright-core, the assembly page of a 1,000-instance
// assembly, REPEATS times each:
//   first_render: from navigation (a fresh page, logged in) until the page lists the first
//     50 instances with the pager saying "of N";
//   live_update: from the API's answer to a flex (N -> N+1, then back) until the open page
//     shows the new count (the page polls the assembly every second);
// and, as the peer in the same run, the API alone: one GET of the same assembly unpaged
// (what a page that does not page would fetch) and its JSON.parse, in the same browser.
// Prints one JSON object on stdout.
//
//   node web/bench/ui_bench.mjs URL TOKEN ASSEMBLY COMPONENT REPEATS
import { launchChromium } from '../test/chromium.mjs';

const [url, token, name, component, repeatsArg] = process.argv.slice(2);
const repeats = Number(repeatsArg || 5);
const median = (xs) => {
  const s = xs.slice().sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const browser = await launchChromium();
const out = {};
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  await page.goto(`${url}/ui/`);
  await page.fill('#token', token);
  await page.click('button[type=submit]');
  await page.waitForSelector('header .me');
  const total = async () => {
    const t = await page.$eval('.pager .facts', (e) => e.textContent).catch(() => '');
    const m = t.match(/of (\d+)/);
    return m ? Number(m[1]) : -1;
  };

  const renders = [];
  for (let i = 0; i < repeats; i++) {
    await page.goto('about:blank');
    const t0 = Date.now();
    await page.goto(`${url}/ui/#/a/${name}`);
    await page.waitForFunction(() => document.querySelectorAll('table.instances tbody tr').length >= 50 &&
      /of \d+/.test((document.querySelector('.pager .facts') || {}).textContent || ''),
    null, { polling: 'raf', timeout: 30000 });
    renders.push(Date.now() - t0);
  }

  const updates = [];
  let n = await total();
  const instances = n;
  for (let i = 0; i < repeats; i++) {
    const to = i % 2 === 0 ? n + 1 : n - 1;
    const answered = await page.evaluate(async ([nm, c, count, tok]) => {
      const r = await fetch(`/app/v1/services/${nm}/components/${c}`, {
        method: 'PUT', credentials: 'omit',
        headers: { Authorization: `Bearer ${tok}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ number_of_containers: count }) });
      if (!r.ok) throw new Error(`flex: ${r.status} ${await r.text()}`);
      return Date.now();
    }, [name, component, to, token]);
    await page.waitForFunction((want) => ((document.querySelector('.pager .facts') || {}).textContent || '')
      .includes(`of ${want}`), to, { polling: 'raf', timeout: 30000 });
    updates.push(Date.now() - answered);
    n = to;
    await new Promise((r) => setTimeout(r, 500 + Math.random() * 1000)); // not in step with the poll
  }

  const peer = [];
  let unpagedBytes = 0;
  let pagedBytes = 0;
  for (let i = 0; i < repeats; i++) {
    const [took, bytes] = await page.evaluate(async (nm) => {
      const t0 = performance.now();
      const text = await (await fetch(`/app/v1/services/${nm}`)).text();
      JSON.parse(text);
      return [performance.now() - t0, text.length];
    }, name);
    peer.push(took);
    unpagedBytes = bytes;
  }
  pagedBytes = await page.evaluate(async (nm) =>
    (await (await fetch(`/app/v1/services/${nm}?containers_limit=50`)).text()).length, name);
  Object.assign(out, {
    instances,
    repeats,
    first_render_ms_median: median(renders),
    first_render_ms_max: Math.max(...renders),
    live_update_ms_median: median(updates),
    live_update_ms_max: Math.max(...updates),
    poll_interval_ms: 1000,
    peer_unpaged_get_and_parse_ms_median: Math.round(median(peer) * 10) / 10,
    answer_bytes_paged: pagedBytes,
    answer_bytes_unpaged: unpagedBytes,
    goal_ms: 1000,
  });
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
