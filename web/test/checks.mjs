// What the dashboard's browser checks share: one line per check, waiting for a condition
// with a deadline, logging in with a token, and the training and serving checks of a
// Fashion-MNIST assembly's page.

// A set of checks: check(ok, what) prints "ok: what" or "FAILED: what"; until(what, f, ms)
// asks f until it holds (a check that held, or failed after ms); failed() counts the
// failures.
export function checks() {
  let failures = 0;
  function check(ok, what) {
    console.log(`${ok ? 'ok' : 'FAILED'}: ${what}`);
    if (!ok) failures++;
    return ok;
  }
  async function until(what, f, ms = 60000) {
    const end = Date.now() + ms;
    for (;;) {
      try {
        if (await f()) return check(true, what);
      } catch (e) {
        // the page is changing under us: ask again
      }
      if (Date.now() > end) {
        check(false, `${what} (not within ${ms / 1000} s)`);
        return false;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return { check, until, failed: () => failures };
}

// Logs `page` in at URL/ui/ with a bearer token; the header's "who am I" text.
export async function logIn(page, url, token, shot) {
  await page.goto(`${url}/ui/`);
  await page.waitForSelector('#token');
  if (shot) await page.screenshot({ path: shot });
  await page.fill('#token', token);
  await page.click('button[type=submit]');
  await page.waitForSelector('header .me');
  return (await page.textContent('header .me')).trim();
}

// On the page of a Fashion-MNIST assembly NAME whose serving component has `replicas`
// replicas: the training curves gain points while the page is open, versions appear on the
// timeline with their accuracy, and every replica switches from one version to a newer one.
// Screenshots training.png and serving.png go to OUT.
export async function trainingAndServing(page, url, name, replicas, out, { check, until }) {
  await page.goto(`${url}/ui/#/a/${name}`);
  const plotted = async (id) => Number((await page.getAttribute(id, 'data-points')) || 0);
  await until('the loss curve has points', async () => (await plotted('#chart-loss')) > 0, 240000);
  const first = await plotted('#chart-loss');
  await until(`the loss curve gains points after ${first}`,
    async () => (await plotted('#chart-loss')) > first, 60000);
  await until('the test accuracy curve has points',
    async () => (await plotted('#chart-accuracy')) > 0, 240000);
  check((await plotted('#chart-samples')) > 0, 'the samples/s curve has points');
  const versions = () => page.$$eval('table.versions', (tables) => {
    const t = tables[0];
    const n = t.querySelectorAll('thead th').length - 3;
    return { replicas: n, rows: [...t.querySelectorAll('tbody tr')].map((tr) => ({
      version: Number(tr.dataset.version),
      accuracy: tr.children[2].textContent,
      served: tr.querySelectorAll('td.served').length })) };
  });
  let seen = null;
  await until('the replicas switch to a newer version, all of them', async () => {
    const v = await versions();
    const served = v.rows.filter((r) => r.served > 0).sort((a, b) => a.version - b.version);
    seen = v;
    return v.replicas === replicas && served.length >= 2 &&
      served[served.length - 1].served === v.replicas;
  }, 300000);
  console.log(`info: the timeline: ${JSON.stringify(seen)}`);
  const exported = seen && seen.rows.find((r) => r.accuracy !== '–');
  check(exported && Number(exported.accuracy) > 0.5,
    `an exported version has its accuracy on the timeline: ${exported && JSON.stringify(exported)}`);
  // The serving charts plot scraped metrics (a rate needs two scrapes with requests between
  // them), so a run that lasts 20 s may switch versions before they have points: they get
  // 30 s more, while the replicas still serve (demo.py destroys nothing before this ends).
  for (const [id, what] of [['#chart-versions', 'the version chart'],
    ['#chart-rps', 'the requests/s chart'], ['#chart-latency', 'the inference latency chart']]) {
    await until(`${what} has points`, async () => (await plotted(id)) > 0, 30000);
  }
  await page.screenshot({ path: `${out}/training.png`, fullPage: true });
  await page.locator('#versions').screenshot({ path: `${out}/serving.png` });
}
