// The API as the page uses it: same-origin requests with the session cookie, every change
// with X-Tarn-CSRF (the server refuses a cookie-authenticated change without it), answers
// parsed, errors as ApiError carrying the server's diagnostics. A request that gets no
// answer at all (the server is gone) rejects with ApiError status 0.
export class ApiError extends Error {
  constructor(status, body) {
    const why = body && typeof body === 'object' ? body.diagnostics || body.error : body;
    super(status === 0 ? 'no answer from tarn server' : `${status}: ${why || 'error'}`);
    this.status = status;
    this.body = body;
    this.reason = body && typeof body === 'object' ? body.reason : undefined;
  }
}

// Called when the server says the session is no good any more (401), e.g. to show the login.
let unauthorized = () => {};
export function onUnauthorized(f) {
  unauthorized = f;
}

export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET') headers['X-Tarn-CSRF'] = '1';
  let payload;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    payload = typeof body === 'string' ? body : JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(path, { method, headers, body: payload, credentials: 'same-origin' });
  } catch (e) {
    throw new ApiError(0, String(e));
  }
  const text = await r.text();
  let data = text;
  try {
    data = text ? JSON.parse(text) : null;
  } catch (e) {
    // text/plain answers stay text
  }
  if (!r.ok) {
    if (r.status === 401 && path !== '/ui/login') unauthorized();
    throw new ApiError(r.status, data);
  }
  return data;
}

export const enc = encodeURIComponent;

// A followed log: calls onText with each chunk until the stream ends or stop() is called.
export function followLog(path, onText, onEnd) {
  const ctl = new AbortController();
  (async () => {
    try {
      const r = await fetch(path, { credentials: 'same-origin', signal: ctl.signal });
      if (!r.ok) {
        onEnd(new ApiError(r.status, await r.text()));
        return;
      }
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        onText(dec.decode(value, { stream: true }));
      }
      onEnd(null);
    } catch (e) {
      if (!ctl.signal.aborted) onEnd(new ApiError(0, String(e)));
    }
  })();
  return () => ctl.abort();
}
