// Live logs: the last lines (GET .../logs?tail=200), then each new line as the
// real-time channel's service.logs message for this service. Each line says where it came
// from: its component and the release whose containers wrote it ("new" for the containers
// of a deploy in progress, so the old and new release of a redeploy can be told apart).
// Follow (keep scrolled to the end), pause (hold new lines), search, a filter by
// component, stdout/stderr colouring.
import { useEffect, useLayoutEffect, useRef, useState } from "../vendor/hooks.mjs";
import { api, on } from "../api.js";
import { fmtTime, html } from "../ui.js";

const MAX_LINES = 2000;
let nextId = 1;

function line(l) {
  return { id: nextId++, timestamp: l.timestamp, stream: l.stream === "stderr" ? "stderr" : "stdout", message: String(l.message ?? ""),
           component: String(l.component ?? ""), release: typeof l.release === "number" ? l.release : null };
}
const keyOf = (l) => `${l.timestamp}|${l.stream}|${l.component}|${l.message}`;

export function Logs({ id }) {
  const [lines, setLines] = useState([]);
  const [paused, setPaused] = useState(false);
  const [held, setHeld] = useState(0);
  const [follow, setFollow] = useState(true);
  const [filter, setFilter] = useState("");
  const [component, setComponent] = useState("");
  const [note, setNote] = useState("");
  const box = useRef(null);
  const pending = useRef([]);  // lines waiting for the next frame (or for resume)
  const pausedRef = useRef(false);
  const history = useRef(null); // null until the tail arrived
  const frame = useRef(0);

  function flush() {
    frame.current = 0;
    if (pausedRef.current || history.current === null) { setHeld(pending.current.length); return; }
    const add = pending.current;
    pending.current = [];
    if (add.length) setLines((old) => { const all = old.concat(add); return all.length > MAX_LINES ? all.slice(-MAX_LINES) : all; });
  }
  function schedule() { if (!frame.current) frame.current = requestAnimationFrame(flush); }

  useEffect(() => {
    let live = true;
    setLines([]); pending.current = []; history.current = null; setNote("");
    let seen = null; // the tail's lines: a follow that starts later may send them again
    const off = on("service.logs", (d) => {
      if (d.service_id !== id) return;
      const l = line(d);
      if (seen && seen.has(keyOf(l))) return;
      pending.current.push(l);
      schedule();
    });
    api(`/api/services/${encodeURIComponent(id)}/logs`, { query: { tail: 200 } }).then((r) => {
      if (!live) return;
      const tail = (r.logs || []).map(line);
      seen = new Set(tail.map(keyOf));
      pending.current = pending.current.filter((l) => !seen.has(keyOf(l)));
      history.current = tail;
      setLines(tail);
      schedule();
    }).catch((e) => {
      if (!live) return;
      history.current = [];
      setNote(e.message);
      schedule();
    });
    return () => { live = false; off(); if (frame.current) cancelAnimationFrame(frame.current); frame.current = 0; };
  }, [id]);

  useLayoutEffect(() => {
    if (follow && !paused && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines, follow, paused, filter]);

  function togglePause() {
    pausedRef.current = !paused;
    setPaused(!paused);
    if (paused) { setHeld(0); schedule(); }
  }

  const needle = filter.trim().toLowerCase();
  const components = [...new Set(lines.map((l) => l.component).filter(Boolean))].sort();
  const shown = lines.filter((l) => (!component || l.component === component)
    && (!needle || l.message.toLowerCase().includes(needle)));

  return html`<section class="card logs-card" aria-labelledby="logs-title">
    <div class="card-head">
      <h2 id="logs-title">Logs</h2>
      <div class="log-tools">
        <label class="inline" for="f-logs-component">Component</label>
        <select id="f-logs-component" data-testid="logs-component" value=${component} onChange=${(e) => setComponent(e.currentTarget.value)}>
          <option value="">All</option>
          ${(component && !components.includes(component) ? [component, ...components] : components).map((c) => html`<option value=${c}>${c}</option>`)}
        </select>
        <label class="inline" for="f-logs-search">Search</label>
        <input id="f-logs-search" type="search" data-testid="logs-search" placeholder="Filter lines…" value=${filter}
          onInput=${(e) => setFilter(e.currentTarget.value)} />
        <label class="inline check"><input type="checkbox" checked=${follow} onChange=${(e) => setFollow(e.currentTarget.checked)} /> Follow</label>
        <button type="button" data-testid="logs-pause" aria-pressed=${paused} onClick=${togglePause}>
          ${paused ? `Resume${held ? ` (${held} new)` : ""}` : "Pause"}</button>
      </div>
    </div>
    <div class="logs" data-testid="logs" ref=${box} role="log" aria-live="off" tabindex="0" aria-label="Log lines">
      ${shown.length === 0 ? html`<p class="muted">${note || (needle || component ? "No line matches." : "No log lines yet.")}</p>` : null}
      ${shown.map((l) => html`<div key=${l.id} class=${"log-line " + l.stream} data-testid="log-line" data-component=${l.component}><time>${fmtTime(l.timestamp)}</time> <span class="log-origin" data-testid="log-origin"
        title=${l.release === null ? "the containers of the deploy in progress" : `release ${l.release}`}>${l.component || "?"}${l.release === null ? " · new" : ` · r${l.release}`}</span> <span class="log-msg">${l.message}</span></div>`)}
    </div>
  </section>`;
}
