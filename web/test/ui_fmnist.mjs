// The dashboard's training and serving pages on the Fashion-MNIST example assembly while it
// trains and serves (examples/fashion-mnist/demo.py --ui-check starts this beside its run):
// in Debian's headless Chromium, log in with a token, open the assembly's page, and see the
// training curves gain points, versions appear on the timeline with their accuracy, and
// every serving replica switch to a newer version. One line per check; the exit status is
// the number of failed checks (0: all held).
//
//   node web/test/ui_fmnist.mjs URL TOKEN ASSEMBLY_NAME SERVING_REPLICAS OUT
import { launchChromium } from './chromium.mjs';
import { checks, logIn, trainingAndServing } from './checks.mjs';
import { mkdirSync } from 'node:fs';

const [url, token, name, replicas, out] = process.argv.slice(2);
if (!out) {
  console.error('usage: node web/test/ui_fmnist.mjs URL TOKEN ASSEMBLY_NAME SERVING_REPLICAS OUT');
  process.exit(2);
}
mkdirSync(out, { recursive: true });
const c = checks();
const browser = await launchChromium();
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } }))
    .newPage();
  const me = await logIn(page, url, token);
  c.check(me.length > 0, `logged in: the header says ${me}`);
  await trainingAndServing(page, url, name, Number(replicas), out, c);
} catch (e) {
  c.check(false, `the page: ${e.message}`);
} finally {
  await browser.close();
}
process.exit(c.failed());
