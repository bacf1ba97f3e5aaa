// An assembly's training and serving, from the series the server scrapes of its instances
// (GET /tarn/v1/services/NAME/metrics; docs/server.md, "Metrics of instances"): curves of
// loss, test accuracy, samples/s and staleness per worker; requests/s, p50/p99 latency and
// errors/s per serving replica; and the version timeline, training and serving on one time
// axis: when each version was exported and how accurate it was, when each replica began
// serving it. Charts are uPlot's (canvas, time axes in the browser's zone).
import { h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import uPlot from 'uplot';
import { api, enc } from './api.js';

const html = htm.bind(h);
const METRICS_POLL_MS = 5000; // the server's default scrape interval
const PAGE = 20; // instances an answer (the API's default; its bound is 100)
const POINTS = 360;
const VERSION_ROWS = 12; // the newest versions the timeline's table lists // per series: thinned by the server, the newest point kept

const TRAIN = ['tarn_train_loss', 'tarn_train_test_accuracy', 'tarn_train_samples_per_second',
  'tarn_train_staleness', 'tarn_train_exported_version'];
const SERVE = ['tarn_serve_requests_total', 'tarn_serve_request_failures_total',
  'tarn_serve_request_latency_seconds:p50', 'tarn_serve_request_latency_seconds:p99',
  'tarn_serve_model_version_state'];

const COLOURS = ['#0b5cad', '#b3261e', '#136c2e', '#8a5a00', '#6a3d9a', '#00727a', '#a4436b',
  '#4d5561'];

// The points of series `name` (summed over label sets whose labels pass `keep`) of one
// instance, as [[ms, value], ...] in time order.
function points(instance, name, keep = () => true) {
  const byTime = new Map();
  for (const s of instance.series || []) {
    if (s.name !== name || !keep(s.labels || {})) continue;
    for (const [t, v] of s.points) byTime.set(t, (byTime.get(t) || 0) + v);
  }
  return [...byTime.entries()].sort((a, b) => a[0] - b[0]);
}

// The inference APIs whose latency the serving charts show: TF Serving's predict and
// KServe v2's infer.
const INFERENCE = ['predict', 'infer'];

// Each replica's p50 and p99 latency, in ms, per inference API it answered (a quantile is
// never summed across APIs).
function latencies(serving) {
  const lines = [];
  for (const i of serving) {
    for (const apiName of INFERENCE) {
      for (const q of ['p50', 'p99']) {
        const pts = points(i, `tarn_serve_request_latency_seconds:${q}`, (l) => l.api === apiName);
        if (pts.length > 0) {
          lines.push({ label: `${i.instance} ${apiName} ${q}`, points: pts.map(([t, v]) => [t, v * 1000]) });
        }
      }
    }
  }
  return lines;
}

// A replica's series of the versions it serves: tarn-serve's model_version_state, AVAILABLE.
function available(instance) {
  return (instance.series || []).filter((s) => s.name === 'tarn_serve_model_version_state' &&
    (s.labels || {}).state === 'AVAILABLE');
}

// A gauge's points from its first non-zero value on (tarn-train's read 0 before its first step).
function started(pts) {
  const i = pts.findIndex((p) => p[1] !== 0);
  return i < 0 ? [] : pts.slice(i);
}

// A counter's points as its rate per second between scrapes (a restart's reset dropped).
function rate(pts) {
  const out = [];
  for (let i = 1; i < pts.length; i++) {
    const dt = (pts[i][0] - pts[i - 1][0]) / 1000;
    const dv = pts[i][1] - pts[i - 1][1];
    if (dt > 0 && dv >= 0) out.push([pts[i][0], dv / dt]);
  }
  return out;
}

// One chart of lines over time. `lines`: [{label, points: [[ms, v]]}]; `step`: draw as steps.
export function Chart({ title, lines, unit = '', step = false, height = 180, id, empty = 'No points yet.' }) {
  const box = useRef(null);
  const plot = useRef(null);
  const xs = [...new Set(lines.flatMap((l) => l.points.map((p) => p[0])))].sort((a, b) => a - b);
  const data = [xs.map((t) => t / 1000)];
  for (const l of lines) {
    const at = new Map(l.points);
    data.push(xs.map((t) => (at.has(t) ? at.get(t) : null)));
  }
  const shape = lines.map((l) => l.label).join('\u0001') + (step ? 's' : '') + (xs.length > 0);
  useEffect(() => {
    if (!box.current || xs.length === 0) return undefined;
    const width = () => Math.max(240, box.current.clientWidth);
    const opts = {
      width: width(),
      height,
      scales: { x: { time: true } },
      axes: [{}, { values: (u, ticks) => ticks.map((v) => `${+v.toPrecision(3)}${unit}`), size: 60 }],
      series: [{}, ...lines.map((l, i) => ({
        label: l.label,
        stroke: COLOURS[i % COLOURS.length],
        width: 2,
        spanGaps: true,
        paths: step ? uPlot.paths.stepped({ align: 1 }) : undefined,
      }))],
      legend: { live: true },
    };
    plot.current = new uPlot(opts, data, box.current);
    const resize = () => plot.current && plot.current.setSize({ width: width(), height });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.current.destroy();
      plot.current = null;
    };
  }, [shape]);
  useEffect(() => {
    if (plot.current) plot.current.setData(data);
  });
  return html`<figure class="chart" id=${id} data-points=${xs.length}>
    <figcaption>${title}</figcaption>
    ${xs.length === 0 ? html`<p class="why">${empty}</p>` : html`<div ref=${box}></div>`}
  </figure>`;
}

// Every instance's series of the assembly: page by page of PAGE instances (at most `pages`),
// each series thinned to POINTS.
async function load(name, pages) {
  const series = [...TRAIN, ...SERVE].join(',');
  let all = [];
  let total = 0;
  for (let offset = 0, n = 0; n < pages; n++, offset += PAGE) {
    const page = await api('GET', `/tarn/v1/services/${enc(name)}/metrics?series=${enc(series)}` +
      `&max_points=${POINTS}&offset=${offset}&limit=${PAGE}`);
    all = all.concat(page.instances || []);
    total = page.total;
    if (offset + PAGE >= total) break;
  }
  return { instances: all, total };
}

// The version timeline: each exported version (when, by whom, its accuracy at export) and,
// per serving replica, when it began serving each version (the first scrape that found it
// AVAILABLE) until the last.
export function versionTimeline(training, serving) {
  const versions = new Map();
  for (const inst of training) {
    const exported = points(inst, 'tarn_train_exported_version');
    const accuracy = points(inst, 'tarn_train_test_accuracy');
    for (let i = 0; i < exported.length; i++) {
      const [t, v] = exported[i];
      if (v <= 0 || (i > 0 && exported[i - 1][1] === v) || versions.has(v)) continue;
      const acc = accuracy.filter((p) => p[0] <= t).pop();
      versions.set(v, { version: v, exported: t, by: inst.instance, accuracy: acc && acc[1], serving: {} });
    }
  }
  for (const inst of serving) {
    for (const s of available(inst)) {
      const on = s.points.filter((p) => p[1] > 0);
      if (!on.length) continue;
      const v = Number(s.labels.version);
      if (!versions.has(v)) versions.set(v, { version: v, serving: {} });
      versions.get(v).serving[inst.instance] = { from: on[0][0], to: on[on.length - 1][0] };
    }
  }
  return [...versions.values()].sort((a, b) => a.version - b.version);
}

// Per replica, the newest version it serves at each scrape, as a line of points.
function servedVersion(inst) {
  const byTime = new Map();
  for (const s of available(inst)) {
    const v = Number(s.labels.version);
    for (const [t, on] of s.points) if (on > 0) byTime.set(t, Math.max(byTime.get(t) || 0, v));
  }
  return [...byTime.entries()].sort((a, b) => a[0] - b[0]);
}

const clock = (ms) => (ms ? new Date(ms).toLocaleTimeString() : '–');

export function Metrics({ name }) {
  const [pages, setPages] = useState(1);
  const [got, setGot] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let live = true;
    const run = async () => {
      try {
        const d = await load(name, pages);
        if (live) {
          setGot(d);
          setError(null);
        }
      } catch (e) {
        if (live) setError(e);
      }
    };
    run();
    const t = setInterval(run, METRICS_POLL_MS);
    return () => {
      live = false;
      clearInterval(t);
    };
  }, [name, pages]);
  if (!got) return error ? html`<p class="banner bad" role="alert">metrics: ${error.message}</p>` : null;
  const has = (inst, prefix) => (inst.series || []).some((s) => s.name.startsWith(prefix));
  const training = got.instances.filter((i) => has(i, 'tarn_train_'));
  const serving = got.instances.filter((i) => has(i, 'tarn_serve_'));
  const shown = got.instances.length;
  const more = shown < got.total && html`<p class="facts">Metrics of ${shown} of ${got.total}
    instances. <button onClick=${() => setPages(pages + 1)}>${PAGE} more</button></p>`;
  if (!training.length && !serving.length) {
    return html`<section class="card" id="metrics"><h3>Metrics</h3>
      <p class="why">No training or serving metrics from this assembly's instances (the server
        reads the port named <code>metrics</code>, else <code>http</code>, at /metrics).</p>${more}</section>`;
  }
  const per = (list, f) => list.map((i) => ({ label: i.instance, points: f(i) }));
  const timeline = versionTimeline(training, serving);
  const replicas = serving.map((i) => i.instance);
  const chief = training.find((i) => points(i, 'tarn_train_exported_version').length) || training[0];
  return html`
    ${error && html`<p class="banner lost" role="alert">metrics: ${error.message}; trying again</p>`}
    ${training.length > 0 && html`<section class="card" id="training"><h3>Training</h3>
      <div class="charts">
        <${Chart} id="chart-loss" title="loss" lines=${per(training, (i) => started(points(i, 'tarn_train_loss')))} />
        <${Chart} id="chart-accuracy" title="test accuracy" lines=${per(training, (i) => started(points(i, 'tarn_train_test_accuracy')))} />
        <${Chart} id="chart-samples" title="samples/s" lines=${per(training, (i) => started(points(i, 'tarn_train_samples_per_second')))} />
        <${Chart} id="chart-staleness" title="staleness (steps)" lines=${per(training, (i) => points(i, 'tarn_train_staleness'))} />
      </div></section>`}
    ${serving.length > 0 && html`<section class="card" id="serving"><h3>Serving</h3>
      <div class="charts">
        <${Chart} id="chart-rps" title="requests/s" lines=${per(serving, (i) => rate(points(i, 'tarn_serve_requests_total')))} />
        <${Chart} id="chart-latency" title="inference latency p50 / p99 (ms)" empty="No predict or infer requests yet." lines=${latencies(serving)} />
        <${Chart} id="chart-errors" title="errors/s (4xx and 5xx answers)" lines=${per(serving, (i) => rate(points(i, 'tarn_serve_request_failures_total')))} />
      </div></section>`}
    <section class="card" id="versions"><h3>Versions: training and serving</h3>
      <${Chart} id="chart-versions" title="version exported by training, and served by each replica" step=${true}
        lines=${[...(chief ? [{ label: `exported (${chief.instance})`, points: points(chief, 'tarn_train_exported_version').filter((p) => p[1] > 0) }] : []),
          ...serving.map((i) => ({ label: `${i.instance} serves`, points: servedVersion(i) }))]} />
      <div class="scroll"><table class="versions">
        <thead><tr><th>version</th><th>exported</th><th>accuracy</th>
          ${replicas.map((r) => html`<th key=${r}>${r} serving since</th>`)}</tr></thead>
        <tbody>${timeline.slice().reverse().slice(0, VERSION_ROWS).map((v) => html`<tr key=${v.version} data-version=${v.version}>
          <td>${v.version}</td><td>${clock(v.exported)}</td>
          <td>${v.accuracy === undefined ? '–' : v.accuracy.toFixed(4)}</td>
          ${replicas.map((r) => html`<td key=${r} class=${v.serving[r] ? 'served' : ''}>${
            v.serving[r] ? clock(v.serving[r].from) : '–'}</td>`)}
        </tr>`)}</tbody></table></div>
      ${timeline.length > VERSION_ROWS && html`<p class="facts">The newest ${VERSION_ROWS} of ${
        timeline.length} versions seen. A version exported between two scrapes shows no export
        time; the replicas' times are the first scrape that found them serving it.</p>`}
    </section>
    ${more}`;
}
