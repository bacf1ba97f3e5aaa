// Builds dist/ (what tarn server serves at /ui/): one minified ES module bundle of src/ and
// the pinned packages, its CSS, and index.html; then prints their sizes, gzipped too (the
// issue's bound: JavaScript and CSS together <= 100 KB gzipped).
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

rmSync('dist', { recursive: true, force: true });
mkdirSync('dist');
await build({
  entryPoints: ['src/main.js'],
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2020',
  outfile: 'dist/app.js',
  legalComments: 'eof',
  logLevel: 'warning',
});
await build({
  entryPoints: ['src/app.css'],
  bundle: true,
  minify: true,
  outfile: 'dist/app.css',
  logLevel: 'warning',
});
copyFileSync('src/index.html', 'dist/index.html');
const sizes = {};
let gz = 0;
for (const f of ['app.js', 'app.css', 'index.html']) {
  const b = readFileSync(`dist/${f}`);
  sizes[f] = { bytes: b.length, gzip: gzipSync(b).length };
  if (f !== 'index.html') gz += sizes[f].gzip;
}
writeFileSync('dist/sizes.json', JSON.stringify({ ...sizes, js_css_gzip: gz }, null, 1) + '\n');
console.log(`web/dist: app.js ${sizes['app.js'].bytes} B (${sizes['app.js'].gzip} gz), ` +
            `app.css ${sizes['app.css'].bytes} B (${sizes['app.css'].gzip} gz); ` +
            `JS + CSS ${gz} B gzipped`);
if (gz > 100 * 1024) {
  console.error('web/dist: JS + CSS over 100 KB gzipped');
  process.exit(1);
}
