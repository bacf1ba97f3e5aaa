// tarn's dashboard: one page (Preact + htm, no build-time JSX) over the server's API, as the
// caller's own session sees it. Routes: /ui/login (the login, with ?code= from `tarn ui`),
// and after the hash #/ (overview), #/a/NAME (an assembly), #/a/NAME/logs/INSTANCE (a log).
// Every view polls what it shows; a view that loses the server says so and keeps trying.
import { h, render } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { api, ApiError, enc, followLog, onUnauthorized } from './api.js';
import { Metrics } from './metrics.js';

const html = htm.bind(h);
const POLL_MS = 2000;
const ASSEMBLY_POLL_MS = 1000; // an assembly's page: a change shows within a second
const INSTANCES_PAGE = 50; // instances of a component a page lists
const EVENTS_SHOWN = 50; // the newest events of an assembly a page lists

// ---- small helpers ------------------------------------------------------------------

function when(ms) {
  return ms ? new Date(ms).toLocaleString() : '';
}

function age(ms) {
  if (!ms) return '';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600)}h`;
}

function mib(n) {
  return n >= 1024 ? `${(n / 1024).toFixed(n % 1024 ? 1 : 0)} GiB` : `${n} MiB`;
}

function stateClass(s) {
  if (['READY', 'STABLE', 'SUCCEEDED'].includes(s)) return 'ok';
  if (['FAILED'].includes(s)) return 'bad';
  if (['STOPPED'].includes(s)) return 'off';
  return 'busy';
}

const State = ({ s }) => html`<span class=${`state ${stateClass(s)}`}>${s}</span>`;

// Polls `load` every `every` ms while mounted; returns [data, error, reload].
function usePoll(load, deps, every = POLL_MS) {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const tick = useRef(0);
  const run = useCallback(async () => {
    const mine = ++tick.current;
    try {
      const d = await load();
      if (mine === tick.current) {
        setData(d);
        setError(null);
      }
    } catch (e) {
      if (mine === tick.current) setError(e);
    }
  }, deps);
  useEffect(() => {
    run();
    const t = setInterval(run, every);
    return () => {
      clearInterval(t);
      tick.current++;
    };
  }, [run, every]);
  return [data, error, run];
}

function Problem({ error }) {
  if (!error) return null;
  if (error.status === 0) {
    return html`<p class="banner lost" role="alert">Lost tarn server; trying again every ${
      POLL_MS / 1000
    } s.</p>`;
  }
  return html`<p class="banner bad" role="alert">${error.message}</p>`;
}

// ---- the login ----------------------------------------------------------------------

function Login({ onIn }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (body) => {
    setBusy(true);
    setError(null);
    try {
      await api('POST', '/ui/login', body);
      history.replaceState(null, '', '/ui/#/'); // the code leaves the address bar
      onIn();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const code = new URLSearchParams(location.search).get('code');
  useEffect(() => {
    if (code && location.pathname === '/ui/login') submit({ code });
  }, []);
  return html`<main class="login">
    <h1>tarn</h1>
    <p>Log in with a token (<code>tarn token create</code>), or run <code>tarn ui</code> for a
      one-time link.</p>
    <form onSubmit=${(e) => { e.preventDefault(); submit({ token: token.trim() }); }}>
      <label for="token">Token</label>
      <input id="token" name="token" type="password" autocomplete="off" value=${token}
        onInput=${(e) => setToken(e.target.value)} placeholder="tarn_…" required />
      <button type="submit" disabled=${busy}>Log in</button>
    </form>
    <${Problem} error=${error} />
  </main>`;
}

// ---- the overview -------------------------------------------------------------------

function Launch({ onLaunched }) {
  const [error, setError] = useState(null);
  const [done, setDone] = useState('');
  const input = useRef(null);
  const launch = async () => {
    setError(null);
    setDone('');
    const file = input.current.files[0];
    if (!file) return setError(new ApiError(400, { diagnostics: 'choose an assembly file' }));
    try {
      const text = await file.text();
      let body;
      try {
        body = JSON.parse(text);
      } catch (e) {
        throw new ApiError(400, { diagnostics: `${file.name}: not JSON (${e.message})` });
      }
      const r = await api('POST', '/app/v1/services', body);
      setDone(r.diagnostics || 'launched');
      onLaunched(body.name);
    } catch (e) {
      setError(e);
    }
  };
  return html`<section class="card" aria-labelledby="launch-h">
    <h2 id="launch-h">Launch</h2>
    <label for="file">Assembly file (YARN service JSON)</label>
    <input id="file" type="file" accept=".json,application/json" ref=${input} />
    <button onClick=${launch}>Launch</button>
    ${done && html`<p class="banner ok" role="status">${done}</p>`}
    <${Problem} error=${error} />
  </section>`;
}

function Overview() {
  const [list, listError, reload] = usePoll(() => api('GET', '/app/v1/services'), []);
  const [nodes] = usePoll(() => api('GET', '/tarn/v1/nodes'), []);
  const [queues] = usePoll(() => api('GET', '/tarn/v1/queues'), []);
  return html`<main>
    <${Problem} error=${listError} />
    <section class="card" aria-labelledby="asm-h">
      <h2 id="asm-h">Assemblies</h2>
      ${list && list.length === 0 && html`<p>None yet.</p>`}
      ${list && list.length > 0 && html`<div class="scroll"><table class="assemblies">
        <thead><tr><th>name</th><th>state</th><th>age</th><th>components</th></tr></thead>
        <tbody>${list.map((a) => html`<tr key=${a.name}>
          <td><a href=${`#/a/${enc(a.name)}`}>${a.name}</a></td>
          <td><${State} s=${a.state} />${a.diagnostics && html`<div class="why">${a.diagnostics}</div>`}</td>
          <td title=${when(a.launch_time)}>${age(a.launch_time)}</td>
          <td>${(a.components || []).map((c) => html`<span class="chip" key=${c.name}>
            ${c.name} ${c.ready_containers}/${c.number_of_containers}</span>`)}</td>
        </tr>`)}</tbody></table></div>`}
    </section>
    <${Launch} onLaunched=${reload} />
    <section class="card" aria-labelledby="nodes-h">
      <h2 id="nodes-h">Nodes</h2>
      ${nodes && html`<div class="scroll"><table>
        <thead><tr><th>node</th><th>CPUs free / all</th><th>memory free / all</th><th>GPUs</th></tr></thead>
        <tbody>${nodes.map((n) => html`<tr key=${n.name}>
          <td>${n.name}</td>
          <td>${n.free.vcores} / ${n.capacity.vcores}</td>
          <td>${mib(n.free.memory_mb)} / ${mib(n.capacity.memory_mb)}</td>
          <td>${(n.gpus || []).length === 0 ? 'none' : n.gpus.map((g) => html`<span
            class=${`chip gpu ${g.holder ? 'held' : 'free'}`} key=${g.index}
            title=${g.holder || 'free'}>GPU ${g.index}: ${g.holder || 'free'}</span>`)}</td>
        </tr>`)}</tbody></table></div>`}
    </section>
    <section class="card" aria-labelledby="queues-h">
      <h2 id="queues-h">Queues</h2>
      ${queues && html`<div class="scroll"><table>
        <thead><tr><th>queue</th><th>used (dominant share)</th><th>guarantee</th><th>cap</th><th>pending</th></tr></thead>
        <tbody>${queues.map((q) => html`<tr key=${q.name}>
          <td>${q.name}</td>
          <td><meter min="0" max="1" value=${q.share} title=${`${(q.share * 100).toFixed(0)}%`}></meter>
            ${(q.share * 100).toFixed(0)}%</td>
          <td>${q.capacity}%</td><td>${q.maximum_capacity}%</td>
          <td>${q.pending}</td>
        </tr>`)}</tbody></table></div>`}
    </section>
  </main>`;
}

// ---- an assembly --------------------------------------------------------------------

function Flex({ name, component, now }) {
  const [n, setN] = useState(String(now));
  const [error, setError] = useState(null);
  const flex = async () => {
    setError(null);
    try {
      await api('PUT', `/app/v1/services/${enc(name)}/components/${enc(component)}`,
        { number_of_containers: Number(n) });
    } catch (e) {
      setError(e);
    }
  };
  return html`<span class="flex">
    <label for=${`flex-${component}`}>instances</label>
    <input id=${`flex-${component}`} type="number" min="0" value=${n}
      onInput=${(e) => setN(e.target.value)} />
    <button onClick=${flex}>Flex</button>
    <${Problem} error=${error} />
  </span>`;
}

function Assembly({ name }) {
  // One component's instances are paged at a time; the others show their first page.
  const [page, setPage] = useState({ component: '', offset: 0 });
  const [a, error] = usePoll(() => api('GET', `/app/v1/services/${enc(name)}?containers_limit=${
    INSTANCES_PAGE}${page.component ? `&component=${enc(page.component)}&containers_offset=${page.offset}` : ''}`),
  [name, page.component, page.offset], ASSEMBLY_POLL_MS);
  const [events] = usePoll(() => api('GET', `/tarn/v1/services/${enc(name)}/events?limit=${EVENTS_SHOWN}`), [name]);
  const [actionError, setActionError] = useState(null);
  const act = async (method, body, question) => {
    if (question && !confirm(question)) return;
    setActionError(null);
    try {
      await api(method, `/app/v1/services/${enc(name)}`, body);
      if (method === 'DELETE') location.hash = '#/';
    } catch (e) {
      setActionError(e);
    }
  };
  if (!a) return html`<main><${Problem} error=${error} /><p>Loading ${name}…</p></main>`;
  let spec = {};
  try {
    spec = JSON.parse(a.spec_json || '{}');
  } catch (e) {
    spec = {};
  }
  const after = Object.fromEntries((spec.components || []).map((c) => [c.name, c.dependencies || []]));
  return html`<main>
    <${Problem} error=${error} />
    <section class="card">
      <h2>${a.name} <${State} s=${a.state} /></h2>
      ${a.diagnostics && html`<p class="why">${a.diagnostics}</p>`}
      <p class="facts">queue ${a.queue || 'default'} · priority ${a.priority ?? 0} · launched ${when(a.launch_time)} ·
        lifetime ${a.lifetime < 0 ? 'unlimited' : `${a.lifetime} s`}</p>
      <div class="actions">
        <button onClick=${() => act('PUT', { state: 'STOPPED' })}>Stop</button>
        <button onClick=${() => act('PUT', { state: 'STARTED' })}>Start</button>
        <button class="danger" onClick=${() => act('DELETE', undefined,
          `Destroy ${a.name}? Its instances stop and its shared directory is removed.`)}>Destroy</button>
      </div>
      <${Problem} error=${actionError} />
    </section>
    ${(a.components || []).map((c) => html`<section class="card" key=${c.name}>
      <h3>${c.name} <${State} s=${c.state} />
        <span class="facts"> ${c.ready_containers}/${c.number_of_containers} ready${
          after[c.name] && after[c.name].length ? ` · after ${after[c.name].join(', ')}` : ''}</span></h3>
      ${c.diagnostics && html`<p class="why">${c.diagnostics}</p>`}
      <${Flex} name=${a.name} component=${c.name} now=${c.number_of_containers} />
      <div class="scroll"><table class="instances">
        <thead><tr><th>instance</th><th>state</th><th>host</th><th>address</th><th>node</th>
          <th>GPUs</th><th>restarts</th><th>last exit</th><th>log</th></tr></thead>
        <tbody>${(c.containers || []).map((i) => html`<tr key=${i.component_instance_name}>
          <td>${i.component_instance_name}</td>
          <td><${State} s=${i.state} />${i.diagnostics && html`<div class="why">${i.diagnostics}</div>`}</td>
          <td>${i.hostname}</td><td>${i.ip}</td><td>${i.bare_host}</td>
          <td>${(i.gpus || []).join(', ') || '–'}</td><td>${i.restarts}</td>
          <td class="why">${i.last_exit}</td>
          <td><a href=${`#/a/${enc(a.name)}/logs/${enc(i.component_instance_name)}`}>log</a></td>
        </tr>`)}</tbody></table></div>
      <${Pager} c=${c} onPage=${(offset) => setPage({ component: c.name, offset })} />
    </section>`)}
    <${Metrics} name=${a.name} />
    <section class="card">
      <h3>Events</h3>
      <ol class="events">${(events || []).slice().reverse().map((e, k) => html`<li key=${k}>
        <time>${when(e.time)}</time> <b>${e.type}</b> ${e.instance || e.component} ${e.message}</li>`)}</ol>
    </section>
  </main>`;
}

// Which instances of a component the page lists, and buttons to the pages before and after.
function Pager({ c, onPage }) {
  const total = c.containers_total === undefined ? (c.containers || []).length : c.containers_total;
  if (total <= INSTANCES_PAGE) return null;
  const from = c.containers_offset || 0;
  const shown = (c.containers || []).length;
  return html`<div class="pager" role="navigation" aria-label=${`${c.name} instances`}>
    <span class="facts">instances ${from + 1}–${from + shown} of ${total}</span>
    <button disabled=${from === 0} onClick=${() => onPage(Math.max(0, from - INSTANCES_PAGE))}>Previous</button>
    <button disabled=${from + shown >= total} onClick=${() => onPage(from + INSTANCES_PAGE)}>Next</button>
  </div>`;
}

// ---- a log --------------------------------------------------------------------------

function Log({ name, instance }) {
  const [stream, setStream] = useState('stdout');
  const [text, setText] = useState('');
  const [ended, setEnded] = useState(null);
  const [find, setFind] = useState('');
  const [run, setRun] = useState(0);
  useEffect(() => {
    setText('');
    setEnded(null);
    const path = `/tarn/v1/services/${enc(name)}/instances/${enc(instance)}/logs?stream=${stream}&follow=true&tail=1048576`;
    return followLog(path, (t) => setText((old) => (old + t).slice(-4 << 20)),
      (e) => setEnded(e || 'ended'));
  }, [name, instance, stream, run]);
  const lines = text.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  const shown = find ? lines.filter((l) => l.includes(find)) : lines;
  return html`<main>
    <section class="card">
      <h2><a href=${`#/a/${enc(name)}`}>${name}</a> / ${instance}</h2>
      <div class="logbar">
        <label for="stream">stream</label>
        <select id="stream" value=${stream} onChange=${(e) => setStream(e.target.value)}>
          <option value="stdout">stdout</option><option value="stderr">stderr</option>
        </select>
        <label for="find">search</label>
        <input id="find" type="search" value=${find} onInput=${(e) => setFind(e.target.value)} />
        <span class="facts">${find ? `${shown.length} of ${lines.length} lines` : `${lines.length} lines`}</span>
      </div>
      <pre class="log" aria-live="polite">${shown.join('\n')}</pre>
      ${ended && html`<p class="banner off" role="status">${
        ended === 'ended' ? 'This run ended: nothing more comes.' : ended.message}
        <button onClick=${() => setRun(run + 1)}>Follow again</button></p>`}
    </section>
  </main>`;
}

// ---- the frame ----------------------------------------------------------------------

function route() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'a' && parts[1] && parts[2] === 'logs' && parts[3]) {
    return html`<${Log} name=${parts[1]} instance=${parts[3]} />`;
  }
  if (parts[0] === 'a' && parts[1]) return html`<${Assembly} name=${parts[1]} />`;
  return html`<${Overview} />`;
}

function App() {
  const [me, setMe] = useState(undefined); // undefined: asking; null: logged out
  const [error, setError] = useState(null);
  const [, setHash] = useState(location.hash);
  const who = async () => {
    try {
      setMe(await api('GET', '/tarn/v1/whoami'));
      setError(null);
    } catch (e) {
      if (e.status === 401) setMe(null);
      else setError(e);
    }
  };
  useEffect(() => {
    onUnauthorized(() => setMe(null));
    if (location.pathname === '/ui/login') setMe(null);
    else who();
    const onHash = () => setHash(location.hash);
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  useEffect(() => {
    if (me !== undefined || !error) return undefined;
    const t = setTimeout(who, POLL_MS); // the server is away: ask again
    return () => clearTimeout(t);
  }, [me, error]);
  const logout = async () => {
    try {
      await api('POST', '/ui/logout');
    } finally {
      setMe(null);
    }
  };
  if (me === null) return html`<${Login} onIn=${who} />`;
  if (me === undefined) return html`<main><${Problem} error=${error} /><p>Asking who you are…</p></main>`;
  return html`<div>
    <header>
      <a class="brand" href="#/">tarn</a>
      <span class="me">${me.tenant} (${me.role})</span>
      <button onClick=${logout}>Log out</button>
    </header>
    ${route()}
  </div>`;
}

const root = document.getElementById('app');
root.textContent = '';  // the "Loading" line index.html shows until this script runs
render(html`<${App} />`, root);
