// A service's page: status, url, health, resources, actions, live deploy progress, the
// event timeline, live logs and backups. Live data comes from /api/ws, narrowed to this
// service; the page fetches again only when the status changes (url, health, timeline).
import { useEffect, useRef, useState } from "../vendor/hooks.mjs";
import { api, on, selectServices } from "../api.js";
import { navigate } from "../router.js";
import { Empty, Loading, Progress, StatusBadge, can, fmtDate, fmtNumber, html, safeUrl, showError, clearError } from "../ui.js";
import { Logs } from "./logs.js";
import { Backups } from "./backups.js";

const enc = encodeURIComponent;

export function ServicePage({ id, session }) {
  const [service, setService] = useState(null);
  const [missing, setMissing] = useState(false);
  const [failure, setFailure] = useState(null);
  const [deleted, setDeleted] = useState(false);
  const [progress, setProgress] = useState(null);
  const [eventsVersion, setEventsVersion] = useState(0);
  const [busy, setBusy] = useState(null);
  const [confirming, setConfirming] = useState(false);
  const statusRef = useRef(null);
  const cancelRef = useRef(null);

  useEffect(() => { if (confirming && cancelRef.current) cancelRef.current.focus(); }, [confirming]);

  async function load() {
    try {
      const s = await api(`/api/services/${enc(id)}`);
      statusRef.current = s.status;
      setService(s);
      setFailure(null);
      document.title = `${s.name} · Slipway`;
    } catch (e) {
      if (e.status === 404) setMissing(true);
      else { showError(e); setFailure(e.message); }
    }
  }

  useEffect(() => {
    setService(null); setMissing(false); setDeleted(false); setProgress(null);
    load();
    selectServices([id]);
    const offs = [
      on("service.status", (d) => {
        if (d.id !== id) return;
        if (d.status === "deleted") { setDeleted(true); return; }
        const changed = statusRef.current !== d.status;
        statusRef.current = d.status;
        setService((s) => (s ? { ...s, status: d.status } : s));
        if (changed) {
          if (d.status !== "deploying") load();
          setEventsVersion((n) => n + 1);
        }
      }),
      on("deploy.progress", (d) => {
        if (d.service_id !== id) return;
        setProgress(d);
        if (d.step === "done" || d.step === "failed") setEventsVersion((n) => n + 1);
      }),
      on("connection", (c) => { if (c.reconnected) { load(); setEventsVersion((n) => n + 1); } }),
    ];
    return () => { offs.forEach((off) => off()); selectServices([]); };
  }, [id]);

  async function act(action) {
    setBusy(action);
    try {
      const r = await api(`/api/services/${enc(id)}/${action}`, { method: "POST" });
      clearError();
      if (r && r.status) {
        statusRef.current = r.status;
        setService((s) => ({ ...s, status: r.status }));
        if (r.status === "deploying") setProgress(null);
      }
      setEventsVersion((n) => n + 1);
      if (action !== "redeploy") load();
    } catch (e) {
      showError(e);
    } finally {
      setBusy(null);
    }
  }

  async function remove() {
    setBusy("delete");
    try {
      await api(`/api/services/${enc(id)}`, { method: "DELETE" });
      clearError();
      navigate("/services");
    } catch (e) {
      showError(e);
      setBusy(null);
      setConfirming(false);
    }
  }

  if (missing) return html`<section><h1>Service not found</h1><p>No service <code>${id}</code> is visible to you. <a href="/services">Back to the services</a>.</p></section>`;
  if (!service && failure) return html`<section><h1>The service could not be loaded</h1><p>${failure}</p>
    <button type="button" onClick=${() => { setFailure(null); load(); }}>Try again</button></section>`;
  if (!service) return html`<${Loading} />`;
  const s = service;
  const deploying = s.status === "deploying";
  const url = safeUrl(s.url);

  return html`<section class="service">
    <p class="crumbs"><a href="/services">Services</a> / <span>${s.name}</span></p>
    <div class="page-head">
      <h1 data-testid="service-name">${s.name}</h1>
      <${StatusBadge} status=${s.status} />
    </div>
    ${deleted ? html`<p class="notice" role="status">This service has been deleted. <a href="/services">Back to the services</a>.</p>` : null}
    ${url ? html`<p class="service-url"><a href=${url} target="_blank" rel="noopener noreferrer">${s.url}</a></p>` : null}

    ${!deleted ? html`<div class="actions" role="group" aria-label="Actions">
      ${can(session, "services:operate") ? html`
        <button type="button" data-testid="action-start" disabled=${!!busy || deploying || s.status === "running"} onClick=${() => act("start")}>${busy === "start" ? "Starting…" : "Start"}</button>
        <button type="button" data-testid="action-stop" disabled=${!!busy || deploying || s.status === "stopped"} onClick=${() => act("stop")}>${busy === "stop" ? "Stopping…" : "Stop"}</button>
        <button type="button" data-testid="action-restart" disabled=${!!busy || deploying} onClick=${() => act("restart")}>${busy === "restart" ? "Restarting…" : "Restart"}</button>` : null}
      ${can(session, "services:deploy") ? html`
        <button type="button" data-testid="action-redeploy" disabled=${!!busy || deploying} onClick=${() => act("redeploy")}>${busy === "redeploy" ? "Redeploying…" : "Redeploy"}</button>` : null}
      ${can(session, "services:delete") ? html`
        <button type="button" class="danger" data-testid="action-delete" disabled=${!!busy} aria-expanded=${confirming}
          onClick=${() => setConfirming(true)}>Delete…</button>` : null}
    </div>` : null}
    ${confirming ? html`<div class="confirm" role="alertdialog" aria-labelledby="confirm-title">
      <p id="confirm-title"><strong>Delete ${s.name}?</strong> Its containers, volumes, backups and route go too; this cannot be undone.</p>
      <div class="actions">
        <button type="button" class="danger" data-testid="confirm-delete" disabled=${busy === "delete"} onClick=${remove}>${busy === "delete" ? "Deleting…" : "Delete permanently"}</button>
        <button type="button" onClick=${() => setConfirming(false)} ref=${cancelRef}>Cancel</button>
      </div>
    </div>` : null}

    ${deploying ? html`<div class="card deploy-progress" aria-live="polite">
      <h2>Deploying</h2>
      <${Progress} value=${progress ? progress.progress : 0} label=${progress ? `${progress.progress} % · ${progress.message || progress.step}` : "Waiting for the deploy to start…"} />
    </div>` : progress && progress.step === "failed" ? html`<p class="notice bad" role="status">Deploy failed: ${progress.message}</p>` : null}

    <div class="cards">
      <div class="card">
        <h2>Health</h2>
        <dl class="facts">
          <dt>Status</dt><dd><span class=${"badge health-" + s.health.status}>${s.health.status}</span></dd>
          <dt>Last check</dt><dd>${fmtDate(s.health.last_check)}</dd>
          <dt>Failures in a row</dt><dd>${s.health.consecutive_failures}</dd>
        </dl>
      </div>
      <div class="card">
        <h2>Resources</h2>
        <dl class="facts">
          <dt>CPU</dt><dd>${fmtNumber(s.resources.cpu_usage, 1)} %${s.resources.cpu_limit ? ` of ${fmtNumber(s.resources.cpu_limit)} %` : ""}</dd>
          <dt>Memory</dt><dd>${fmtNumber(s.resources.memory_usage_mb)} / ${fmtNumber(s.resources.memory_limit_mb)} MB</dd>
          <dt>Storage</dt><dd>${s.resources.storage_mb === undefined ? "—" : fmtNumber(s.resources.storage_mb, 1) + " MB"}</dd>
        </dl>
      </div>
      <div class="card">
        <h2>Details</h2>
        <dl class="facts">
          <dt>Customer</dt><dd>${s.customer_name || s.customer_id}</dd>
          <dt>Method</dt><dd>${s.deploy_method}${s.template ? ` (${s.template})` : ""}</dd>
          ${s.git_url ? html`<dt>Repository</dt><dd class="mono">${s.git_url}${s.git_branch ? ` @ ${s.git_branch}` : ""}</dd>` : null}
          ${s.ai_url ? html`<dt>Repository</dt><dd class="mono">${s.ai_url}</dd>` : null}
          ${s.commit ? html`<dt>Commit</dt><dd class="mono">${s.commit.slice(0, 12)}</dd>` : null}
          <dt>Created</dt><dd>${fmtDate(s.created_at)}</dd>
          <dt>Deployed</dt><dd>${fmtDate(s.deployed_at)}</dd>
        </dl>
      </div>
    </div>

    ${s.compose ? html`<details class="card">
      <summary>Compose definition</summary>
      <pre class="code">${s.compose}</pre>
    </details>` : null}

    ${can(session, "services:logs") ? html`<${Logs} id=${id} />` : null}
    <${Events} id=${id} version=${eventsVersion} />
    ${can(session, "backups:read") ? html`<${Backups} id=${id} session=${session} status=${s.status} />` : null}
  </section>`;
}

function Events({ id, version }) {
  const [events, setEvents] = useState(null);
  const [more, setMore] = useState(false);
  const [page, setPage] = useState(1);

  async function fetchPage(p, replace) {
    try {
      const r = await api(`/api/services/${enc(id)}/events`, { query: { page: p, per_page: 20 } });
      setEvents((old) => (replace || !old ? r.data : [...old, ...r.data]));
      setMore(p * r.per_page < r.total);
      setPage(p);
    } catch (e) {
      showError(e);
      if (replace) setEvents([]);
    }
  }

  useEffect(() => { fetchPage(1, true); }, [id, version]);

  return html`<section class="card" data-testid="events" aria-labelledby="events-title">
    <h2 id="events-title">Events</h2>
    ${events === null ? html`<${Loading} />` : events.length === 0 ? html`<${Empty}>No events yet.</${Empty}>` : html`
      <ol class="timeline">
        ${events.map((ev) => html`<li data-testid="event">
          <span class="ev-when" title=${ev.timestamp}>${fmtDate(ev.timestamp)}</span>
          <span class="ev-what"><span class=${"badge ev ev-" + ev.status}>${ev.type} · ${ev.status}</span> ${ev.message}</span>
        </li>`)}
      </ol>
      ${more ? html`<button type="button" class="ghost" onClick=${() => fetchPage(page + 1, false)}>Older events</button>` : null}`}
  </section>`;
}
