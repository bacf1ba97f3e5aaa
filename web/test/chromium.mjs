// Debian's headless Chromium, started by playwright-core through its executable path (no
// browser is downloaded), for the dashboard's test and benchmark: $TARN_CHROMIUM, else
// chromium-headless-shell, else chromium.
import { chromium } from 'playwright-core';
import { existsSync } from 'node:fs';

export function launchChromium() {
  const executablePath = [process.env.TARN_CHROMIUM, '/usr/bin/chromium-headless-shell',
    '/usr/bin/chromium'].find((p) => p && existsSync(p));
  return chromium.launch({
    executablePath,
    args: ['--disable-dev-shm-usage', '--disable-gpu', '--no-sandbox',
      // nothing of Chromium's own reaches for the network (this machine's is closed)
      '--disable-background-networking', '--disable-component-update', '--no-first-run',
      '--disable-sync'],
  });
}
