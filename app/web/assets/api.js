// The panel API client: one fetch wrapper (same-origin cookie, X-Requested-With for the
// CSRF rule, the API's error body turned into an ApiError) and the /api/ws client.

export class ApiError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(err.message || `The server answered ${status}.`);
    this.status = status;
    this.code = err.code || "";
    this.fields = err.fields || {};
  }
}

let onUnauthorized = () => {};
/** Called when an authenticated request answers 401 (the session ended). */
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

/** A JSON request under /api. Resolves to the parsed body (null for 204). */
export async function api(path, { method = "GET", body, query, quiet401 = false } = {}) {
  let url = path;
  if (query) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined && v !== null && v !== "") params.set(k, String(v));
    }
    const qs = params.toString();
    if (qs) url += (url.includes("?") ? "&" : "?") + qs;
  }
  const headers = { "X-Requested-With": "slipway", Accept: "application/json" };
  const init = { method, headers, credentials: "same-origin" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch (e) {
    throw new ApiError(0, { error: { message: "The server cannot be reached. Check your connection." } });
  }
  if (response.status === 204) {
    await response.text(); // read to the end: an unread body counts as an aborted request
    return null;
  }
  let data = null;
  const type = response.headers.get("Content-Type") || "";
  if (type.includes("json")) {
    try { data = await response.json(); } catch (e) { data = null; }
  }
  if (!response.ok) {
    if (response.status === 401 && !quiet401) onUnauthorized();
    throw new ApiError(response.status, data);
  }
  return data;
}

/** The served panel contract as JSON, fetched once per page load. */
let contractPromise = null;
export function contract() {
  if (!contractPromise) {
    contractPromise = api("/api/openapi.json").catch((e) => { contractPromise = null; throw e; });
  }
  return contractPromise;
}

/** What the served contract says of each deploy method: `capabilities` (DeployMethod's
 * x-slipway-capabilities: {name: {source_fields, fetches_source, deploys_on_push,
 * previews}}) and `fields` ({name: the fields its create request takes}). The page reads
 * these, never a method's name. */
export function deployMethodsOf(doc) {
  const schemas = (doc && doc.components && doc.components.schemas) || {};
  const fields = {};
  for (const rule of (schemas.ServiceCreate && schemas.ServiceCreate.allOf) || []) {
    const name = rule.if && rule.if.properties && rule.if.properties.deploy_method && rule.if.properties.deploy_method.const;
    if (name) fields[name] = Object.keys((rule.then && rule.then.properties) || {});
  }
  return { capabilities: (schemas.DeployMethod && schemas.DeployMethod["x-slipway-capabilities"]) || {}, fields };
}

// --- the real-time channel (/api/ws) ------------------------------------------------

const listeners = new Map(); // type -> Set(fn)
let socket = null;
let wanted = false;
let selection = []; // null: everything the key may see; else these service ids (none at first)
let retry = 0;
let retryTimer = null;
let onSocketEnded = () => {};

/** Called when the server closes the channel with 1008 (key revoked, session ended). */
export function setSocketEndedHandler(fn) { onSocketEnded = fn; }

function emit(type, data) {
  const set = listeners.get(type);
  if (set) for (const fn of [...set]) fn(data);
}

function sendSelection() {
  if (!socket || socket.readyState !== 1) return;
  socket.send(JSON.stringify(selection === null ? { type: "subscribe" } : { type: "subscribe", services: selection }));
}

function open() {
  if (socket || !wanted) return;
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${scheme}//${location.host}/api/ws`);
  socket = ws;
  ws.onopen = () => {
    const again = retry > 0;
    retry = 0;
    sendSelection();
    emit("connection", { open: true, reconnected: again });
  };
  ws.onmessage = (e) => {
    let message;
    try { message = JSON.parse(e.data); } catch (err) { return; }
    if (message && typeof message.type === "string") emit(message.type, message.data || {});
  };
  ws.onclose = (e) => {
    if (socket === ws) socket = null;
    emit("connection", { open: false });
    if (!wanted) return;
    if (e.code === 1008) onSocketEnded(e.reason || "");
    const delay = Math.min(30000, 1000 * 2 ** Math.min(retry, 5));
    retry += 1;
    clearTimeout(retryTimer);
    retryTimer = setTimeout(open, delay);
  };
}

/** Keep the channel open (with reconnects) while signed in. */
export function connectRealtime() { wanted = true; open(); }

export function disconnectRealtime() {
  wanted = false;
  clearTimeout(retryTimer);
  if (socket) { const ws = socket; socket = null; ws.close(1000); }
}

/** Narrow the stream to these services (null: everything the key may see). */
export function selectServices(ids) {
  const next = ids === null ? null : [...new Set(ids)].slice(0, 200);
  if (JSON.stringify(next) === JSON.stringify(selection)) return;
  selection = next;
  sendSelection();
}

/** Listen to one message type; returns the function that stops listening. */
export function on(type, fn) {
  if (!listeners.has(type)) listeners.set(type, new Set());
  listeners.get(type).add(fn);
  return () => listeners.get(type).delete(fn);
}

export function realtimeOpen() { return !!socket && socket.readyState === 1; }
