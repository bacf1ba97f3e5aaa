// The dashboard in a real browser (Debian's Chromium, driven by playwright-core through
// executablePath; no browser download), against a real tarn server that tests/ui_test.cc
// started. Each check prints one line; the exit status is the number of failed checks (0:
// all held). Screenshots of each page go to OUT. The training and serving pages are checked
// on the Fashion-MNIST example assembly itself, beside DemoTest's run of it
// (web/test/ui_fmnist.mjs).
//
//   node web/test/ui_test.mjs URL ALICE_TOKEN BOB_LOGIN_URL ASSEMBLY_FILE MANY_FILE OUT
//
// BOB_LOGIN_URL is what `tarn ui` printed for a second user: good once. ASSEMBLY_FILE
// is a sleeper whose instances print a line every half second; MANY_FILE an assembly of
// 1,000 instances.
import { launchChromium } from './chromium.mjs';
import { checks, logIn } from './checks.mjs';
import { mkdirSync, readFileSync } from 'node:fs';

const [url, aliceToken, bobLoginUrl, assemblyFile, manyFile, out] = process.argv.slice(2);
const many = JSON.parse(readFileSync(manyFile, 'utf8'));
const MAX_ANSWER = 128 * 1024; // bytes: the bound on any answer behind the page
const assembly = JSON.parse(readFileSync(assemblyFile, 'utf8'));
mkdirSync(out, { recursive: true });
const { check, until, failed } = checks();

const browser = await launchChromium();
try {
  const alice = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await alice.newPage();
  page.on('dialog', (d) => d.accept()); // the confirmation of destroy

  // Log in with a token.
  const me = await logIn(page, url, aliceToken, `${out}/login.png`);
  check(me.includes('(user)'), `logged in: the header says ${me}`);
  const cookie = (await alice.cookies()).find((c) => c.name === 'tarn_session');
  check(cookie && cookie.httpOnly && cookie.sameSite === 'Strict',
    `the session cookie is HttpOnly and SameSite=Strict: ${JSON.stringify(cookie && {
      httpOnly: cookie.httpOnly, sameSite: cookie.sameSite })}`);
  check(await page.evaluate(() => !document.cookie.includes('tarn_session')),
    'no script can read the session cookie');

  // Launch the sleeper from the page and see it STABLE.
  await page.setInputFiles('#file', assemblyFile);
  await page.click('button:text-is("Launch")');
  const row = `table.assemblies tr:has(a:text-is("${assembly.name}"))`;
  await until(`${assembly.name} listed STABLE`, async () =>
    (await page.textContent(row)).includes('STABLE'));
  await page.screenshot({ path: `${out}/overview.png` });

  // Flex it to 3 from its page and see 3 instances.
  await page.click(`${row} a`);
  await page.waitForSelector('table.instances');
  const component = assembly.components[0].name;
  await page.fill(`#flex-${component}`, '3');
  await page.click('text=Flex');
  await until('3 instances, all READY', async () => {
    const states = await page.$$eval('table.instances tbody tr td:nth-child(2) .state',
      (els) => els.map((e) => e.textContent));
    return states.length === 3 && states.every((s) => s === 'READY');
  });
  await page.screenshot({ path: `${out}/assembly.png` });

  // Open an instance's log and see a line appear that it writes after the page opened.
  await page.click('table.instances tbody tr:first-child a:text-is("log")');
  await page.waitForSelector('pre.log');
  const ticks = async () => {
    const found = [...(await page.textContent('pre.log')).matchAll(/tick (\d+)/g)];
    return found.length ? Number(found[found.length - 1][1]) : -1;
  };
  const opened = await ticks();
  await until(`a tick after ${opened} appears while the page is open`,
    async () => (await ticks()) > opened, 30000);
  // Search in the loaded part.
  await page.fill('#find', `tick ${opened + 1}`);
  await until('the search shows the matching line alone', async () =>
    (await page.textContent('pre.log')).trim() === `tick ${opened + 1}`, 10000);
  await page.screenshot({ path: `${out}/log.png` });

  // The phone width.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${url}/ui/#/`);
  await page.waitForSelector('table.assemblies');
  await page.screenshot({ path: `${out}/overview-phone.png`, fullPage: true });
  await page.setViewportSize({ width: 1280, height: 800 });

  // A second user, logged in by `tarn ui`'s one-time URL, sees none of the first user's
  // assemblies, even by its address.
  const bob = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const other = await bob.newPage();
  await other.goto(bobLoginUrl);
  await other.waitForSelector('header .me');
  const bobMe = (await other.textContent('header .me')).trim();
  check(bobMe.startsWith('bob '), `the one-time URL logged in ${bobMe}`);
  check(!(await other.evaluate(() => location.search.includes('code'))),
    'the code left the address bar');
  // The same URL again, from another browser: refused, saying why.
  const again = await (await browser.newContext()).newPage();
  await again.goto(bobLoginUrl);
  await until('a used login URL is refused, saying so', async () =>
    (await again.textContent('main')).includes('unknown, used or expired'), 10000);
  await until("bob's overview lists no assembly", async () =>
    (await other.textContent('#asm-h + *')).includes('None yet'), 10000);
  await other.goto(`${url}/ui/#/a/${assembly.name}`);
  await until(`bob's page of ${assembly.name} says it is not found`, async () =>
    (await other.textContent('main')).includes('404'), 10000);

  // A lost server (the browser taken offline, so no request gets an answer): the page says
  // so and keeps trying; when answers come again the banner goes and the page is live again.
  await page.goto(`${url}/ui/#/`);
  await page.waitForSelector('table.assemblies');
  await alice.setOffline(true);
  await until('with no answer from the server the page says it lost it', async () =>
    ((await page.textContent('.banner.lost')) || '').includes('Lost tarn server'), 15000);
  await alice.setOffline(false);
  await until('with the server back the banner goes and the list is there again', async () =>
    (await page.$('.banner.lost')) === null &&
    (await page.$(`table.assemblies a:text-is("${assembly.name}")`)) !== null, 15000);

  // Destroy from the page (the confirmation accepted), and it is gone; before the 1,000
  // instances start (once, with them starting, the sleeper took over 60 s to go).
  await page.goto(`${url}/ui/#/a/${assembly.name}`);
  await page.waitForSelector('text=Destroy');
  await page.click('text=Destroy');
  await until(`${assembly.name} gone from the overview`, async () =>
    (await page.$(row)) === null && (await page.$('#asm-h')) !== null);

  // 1,000 instances: every answer behind the page stays bounded, and the instances page.
  const answers = [];
  const sized = (r) => {
    if (!r.url().includes('/app/v1/') && !r.url().includes('/tarn/v1/')) return;
    if (r.url().includes('/logs')) return; // a followed log is a stream, bounded by its tail
    answers.push(r.body().then((b) => ({ url: r.url(), bytes: b.length })).catch(() => null));
  };
  await page.goto(`${url}/ui/#/`);
  await page.setInputFiles('#file', manyFile);
  await page.click('button:text-is("Launch")');
  await until(`${many.name} listed`, async () =>
    (await page.$(`table.assemblies a:text-is("${many.name}")`)) !== null);
  page.on('response', sized);
  await page.goto(`${url}/ui/#/a/${many.name}`);
  const pager = '.pager .facts';
  await until('the first 50 of 1000 instances listed', async () =>
    (await page.textContent(pager)).includes('instances 1–50 of 1000') &&
    (await page.$$('table.instances tbody tr')).length === 50, 60000);
  await page.click('.pager button:text-is("Next")');
  await until('the next page lists instances 51-100', async () =>
    (await page.textContent(pager)).includes('instances 51–100 of 1000') &&
    (await page.textContent('table.instances tbody tr:first-child td')) === 'many-50', 30000);
  await new Promise((r) => setTimeout(r, 6000)); // a few rounds of polling, metrics too
  await page.screenshot({ path: `${out}/many.png` });
  page.off('response', sized);
  const got = (await Promise.all(answers)).filter(Boolean);
  const biggest = got.reduce((m, a) => (a.bytes > m.bytes ? a : m), { bytes: 0 });
  check(got.length >= 5 && biggest.bytes <= MAX_ANSWER,
    `${got.length} answers behind the 1,000-instance page, the biggest ${biggest.bytes} B (${
      biggest.url}), bound ${MAX_ANSWER}`);
  const unpaged = await page.evaluate(async (n) =>
    (await (await fetch(`/app/v1/services/${n}`)).text()).length, many.name);
  console.log(`info: the same assembly unpaged (YARN's GET, which the page never asks for): ${unpaged} B`);
  const metricsAnswers = got.filter((a) => a.url.includes('/metrics'));
  check(metricsAnswers.length > 0 && metricsAnswers.every((a) => a.url.includes('limit=')),
    `the page asks for metrics a page at a time (${metricsAnswers.length} answers)`);

  // Logging out ends the session: the page shows the login, and the cookie is refused.
  await page.click('text=Log out');
  await page.waitForSelector('#token');
  const after = await page.evaluate(async () => (await fetch('/tarn/v1/whoami')).status);
  check(after === 401, `after logout the API answers ${after}`);
} finally {
  await browser.close();
}
process.exit(failed());
