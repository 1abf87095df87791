// A service's page: its name, status and the actions its state allows, the reason of a
// failure at the top, then tabs kept in the address (?tab=...): Overview (health,
// resources, details, live deploy progress, live logs, the event timeline), Releases
// (roll back), Deploys (history, cancel), Settings (variables, the deploy method's
// fields, custom domains) and Backups. Live data comes from /api/ws, narrowed to this
// service; the page fetches again only when the status changes or a deploy ends. What the
// tabs draw of the deploy method (its fields, the Git tab) comes from the served contract.
import { useEffect, useRef, useState } from "../vendor/hooks.mjs";
import { api, contract, on, selectServices } from "../api.js";
import { navigate, useRoute } from "../router.js";
import { Empty, Field, Loading, Pager, Progress, StatusBadge, can, clearError, fmtDate, fmtNumber, html, safeUrl, showError } from "../ui.js";
import { Logs } from "./logs.js";
import { Backups } from "./backups.js";
import { Git } from "./git.js";
import { SchemaField, bodyValue, deployMethods, isMultiline, titleOf, widgetValue } from "../schemaform.js";

const enc = encodeURIComponent;

/** The tabs a session may open on a service, in order: [key, label]. Git: a service whose
 * deploy method (the contract's, once loaded) deploys on push or has previews, for keys
 * with services:deploy; without it, the previews of one (not a preview). */
function tabsFor(session, service, method) {
  const git = !!method && (method.deploysOnPush || method.previews)
    && (can(session, "services:deploy") || !service.preview_of);
  return [["overview", "Overview"], ["releases", "Releases"], ["deploys", "Deploys"],
    ...(can(session, "services:deploy") ? [["settings", "Settings"]] : []),
    ...(git ? [["git", "Git"]] : []),
    ...(can(session, "backups:read") ? [["backups", "Backups"]] : [])];
}

/** What each state allows (the API's rules: nothing but delete while deploying, stop of a
 * stopped service is a no-op, a failed one has nothing to stop or restart). */
export function allowedActions(status) {
  return {
    start: status === "stopped",
    stop: status === "running",
    restart: status === "running",
    redeploy: status === "running" || status === "stopped" || status === "failed",
  };
}

export function ServicePage({ id, session }) {
  const route = useRoute();
  const [service, setService] = useState(null);
  const [methods, setMethods] = useState(null); // the served contract's deploy methods
  const method = service && methods ? methods[service.deploy_method] || null : null;
  const tabs = tabsFor(session, service, method);
  const asked = route.query.get("tab");
  // a tab the deploy method's capabilities may give (Git) is not taken for an unknown one
  // before the contract is read
  const tab = tabs.some(([k]) => k === asked) ? asked : asked && methods === null ? null : "overview";
  const [missing, setMissing] = useState(false);
  const [failure, setFailure] = useState(null);
  const [deleted, setDeleted] = useState(false);
  const [progress, setProgress] = useState(null);
  const [version, setVersion] = useState(0); // bumped when the timeline, releases or deploys may have changed
  const [busy, setBusy] = useState(null);
  const [confirming, setConfirming] = useState(false);
  const [reason, setReason] = useState(null); // why a failed service failed
  const statusRef = useRef(null);
  const cancelRef = useRef(null);
  const bump = () => setVersion((n) => n + 1);

  useEffect(() => { if (confirming && cancelRef.current) cancelRef.current.focus(); }, [confirming]);
  useEffect(() => {
    contract().then((doc) => setMethods(deployMethods(doc))).catch((e) => { showError(e); setMethods({}); });
  }, []);

  // Answers can come back out of order (a status event asks again while an earlier load is
  // on its way), and a later state must not be overwritten by an earlier answer: each load,
  // status event and action's answer takes a number, and a load's answer counts only when
  // nothing newer came meanwhile.
  const seqRef = useRef(0);
  const loadedRef = useRef(false); // the page holds this service's detail
  const eventsRef = useRef(0); // service.status events received (an action's answer is older than one that came meanwhile)

  async function load() {
    const seq = ++seqRef.current;
    try {
      const s = await api(`/api/services/${enc(id)}`);
      if (seq !== seqRef.current) return; // something newer came meanwhile
      loadedRef.current = true;
      statusRef.current = s.status;
      setService(s);
      setFailure(null);
      document.title = `${s.name} · Slipway`;
    } catch (e) {
      if (seq !== seqRef.current) return; // a newer load answers for the page
      if (e.status === 404) setMissing(true);
      else { showError(e); setFailure(e.message); }
    }
  }

  useEffect(() => {
    setService(null); setMissing(false); setDeleted(false); setProgress(null);
    loadedRef.current = false;
    load();
    selectServices([id]);
    const offs = [
      on("service.status", (d) => {
        if (d.id !== id) return;
        if (d.status === "deleted") { setDeleted(true); return; }
        const changed = statusRef.current !== d.status;
        statusRef.current = d.status;
        eventsRef.current += 1;
        setService((s) => (s ? { ...s, status: d.status } : s));
        if (changed) {
          // an answer still on its way is older than this event: a new load, or (while a
          // deploy runs, the page holding the service) only the status, which the event has
          if (d.status !== "deploying" || !loadedRef.current) load();
          else seqRef.current += 1;
          bump();
        }
      }),
      on("deploy.progress", (d) => {
        if (d.service_id !== id) return;
        setProgress(d);
        if (d.step === "done" || d.step === "failed") bump();
      }),
      on("backup.progress", (d) => {
        if (d.service_id === id && (d.status === "completed" || d.status === "failed")) bump();
      }),
      on("connection", (c) => { if (c.reconnected) { load(); bump(); } }),
    ];
    return () => { offs.forEach((off) => off()); selectServices([]); };
  }, [id]);

  // the reason of a failure: the newest failed event of the timeline, shown at the top
  const status = service && service.status;
  useEffect(() => {
    if (status !== "failed") { setReason(null); return; }
    let live = true;
    api(`/api/services/${enc(id)}/events`, { query: { per_page: 20 } }).then((r) => {
      const ev = r.data.find((e) => e.status === "failed");
      if (live) setReason(ev ? ev.message : "The last operation failed; see the events.");
    }).catch(() => { if (live) setReason("The last operation failed; see the events."); });
    return () => { live = false; };
  }, [id, status, version]);

  async function act(action, body) {
    setBusy(action);
    try {
      const events = eventsRef.current;
      const r = await api(`/api/services/${enc(id)}/${action}`, { method: "POST", body });
      clearError();
      // a status event that came while the request was out is as new as its answer or newer
      // (a redeploy that failed at once: "failed" may come before the answer's "deploying")
      if (r && r.status && eventsRef.current === events) {
        seqRef.current += 1; // a load still on its way is older than this answer
        statusRef.current = r.status;
        setService((s) => ({ ...s, status: r.status }));
        if (r.status === "deploying") setProgress(r.deploy_job_id ? { deploy_job_id: r.deploy_job_id, progress: 0, step: "queued" } : null);
      }
      bump();
      if (action !== "redeploy" && action !== "rollback") load();
      return r;
    } catch (e) {
      showError(e);
      return null;
    } finally {
      setBusy(null);
    }
  }

  async function cancelDeploy() {
    setBusy("cancel");
    try {
      let jobId = progress && progress.deploy_job_id;
      if (!jobId) {
        const r = await api(`/api/services/${enc(id)}/deploys`, { query: { per_page: 5 } });
        const active = r.data.find((j) => j.status === "queued" || j.status === "running");
        jobId = active && active.id;
      }
      if (!jobId) { showError("No deploy of this service is queued or running."); return; }
      await api(`/api/services/${enc(id)}/deploys/${enc(jobId)}/cancel`, { method: "POST" });
      clearError();
      bump();
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
  const allowed = allowedActions(s.status);
  const url = safeUrl(s.url);
  const base = `/services/${enc(id)}`;

  return html`<section class="service">
    <p class="crumbs"><a href="/services">Services</a> / <span>${s.name}</span></p>
    <div class="page-head">
      <h1 data-testid="service-name">${s.name}</h1>
      <${StatusBadge} status=${s.status} />
      ${s.release ? html`<span class="badge" data-testid="running-release">release ${s.release}</span>` : null}
    </div>
    ${s.preview_of ? html`<${PreviewOf} service=${s} />` : null}
    ${deleted ? html`<p class="notice" role="status">This service has been deleted. <a href="/services">Back to the services</a>.</p>` : null}
    ${s.status === "failed" ? html`<div class="notice bad failure" role="alert" data-testid="failure-reason">
      <strong>This service failed.</strong> ${reason || "Reading why…"}
      ${can(session, "services:deploy") ? html`<span class="muted" data-testid="failure-advice">${s.release
        ? " Fix its settings and redeploy, or roll back to an earlier release (Releases)."
        : " Fix its settings and redeploy: it has no release yet, so there is nothing to roll back to."}</span>` : null}
    </div>` : null}
    ${s.url ? html`<p class="service-url" data-testid="service-url">${url && s.status === "running"
      ? html`<a href=${url} target="_blank" rel="noopener noreferrer">${s.url}</a>`
      : html`<span class="muted" title="Not served while the service is not running">${s.url} (not running)</span>`}</p>` : null}

    ${!deleted ? html`<div class="actions" role="group" aria-label="Actions">
      ${can(session, "services:operate") ? html`
        ${allowed.start ? html`<button type="button" data-testid="action-start" disabled=${!!busy} onClick=${() => act("start")}>${busy === "start" ? "Starting…" : "Start"}</button>` : null}
        ${allowed.stop ? html`<button type="button" data-testid="action-stop" disabled=${!!busy} onClick=${() => act("stop")}>${busy === "stop" ? "Stopping…" : "Stop"}</button>` : null}
        ${allowed.restart ? html`<button type="button" data-testid="action-restart" disabled=${!!busy} onClick=${() => act("restart")}>${busy === "restart" ? "Restarting…" : "Restart"}</button>` : null}` : null}
      ${can(session, "services:deploy") ? html`
        ${allowed.redeploy ? html`<button type="button" data-testid="action-redeploy" disabled=${!!busy} onClick=${() => act("redeploy")}>${busy === "redeploy" ? "Redeploying…" : "Redeploy"}</button>` : null}
        ${deploying ? html`<button type="button" data-testid="action-cancel-deploy" disabled=${!!busy} onClick=${cancelDeploy}>${busy === "cancel" ? "Cancelling…" : "Cancel deploy"}</button>` : null}` : null}
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
      <${Progress} value=${progress ? progress.progress : 0} label=${progress && progress.step !== "queued" ? `${progress.progress} % · ${progress.message || progress.step}` : "Waiting for the deploy to start…"} />
    </div>` : progress && progress.step === "failed" && (progress.message === "cancelled" || s.status !== "failed")
      // a failed service's reason is said once, at the top (failure-reason): not again here
      ? html`<p class=${"notice" + (progress.message === "cancelled" ? "" : " bad")} role="status" data-testid="deploy-failed">
      ${progress.message === "cancelled" ? "Deploy cancelled: what it started was removed." : `Deploy failed: ${progress.message}`}</p>` : null}

    <nav class="tabs" aria-label="Sections of the service">
      ${tabs.map(([key, label]) => html`<a href=${key === "overview" ? base : `${base}?tab=${key}`} data-testid=${"tab-" + key}
        aria-current=${tab === key ? "page" : undefined}>${label}</a>`)}
    </nav>

    ${tab === null || (tab === "settings" && methods === null) ? html`<${Loading} />`
      : tab === "overview" ? html`<${Overview} s=${s} id=${id} session=${session} version=${version} method=${method} />`
      : tab === "releases" ? html`<${Releases} service=${s} session=${session} version=${version} busy=${busy}
          onRollback=${(releaseId) => act("rollback", { release_id: releaseId })} />`
      : tab === "deploys" ? html`<${Deploys} service=${s} session=${session} version=${version} onChange=${bump} />`
      : tab === "settings" ? html`<${Settings} service=${s} method=${method} onSaved=${(next) => setService(next)}
          onRedeploy=${allowed.redeploy ? () => act("redeploy") : null} />`
      : tab === "git" ? html`<${Git} service=${s} session=${session} version=${version} pushes=${method.deploysOnPush}
          previews=${method.previews} onSaved=${(next) => setService(next)} />`
      : html`<${Backups} id=${id} session=${session} status=${s.status} volumes=${s.volumes || []} />`}
  </section>`;
}

/** "Preview of <parent> (PR #n)" at the top of a preview's page, the parent linked. */
function PreviewOf({ service }) {
  const [parent, setParent] = useState(null);
  useEffect(() => {
    let live = true;
    setParent(null);
    api(`/api/services/${enc(service.preview_of)}`).then((p) => { if (live) setParent(p); })
      .catch(() => { /* not visible or gone: its id is shown */ });
    return () => { live = false; };
  }, [service.preview_of]);
  return html`<p class="preview-of" data-testid="preview-of">Preview of${" "}<a href=${"/services/" + enc(service.preview_of)}
    data-testid="preview-parent">${parent ? parent.name : service.preview_of}</a>${" "}(PR #${service.preview_number})</p>`;
}

function Overview({ s, id, session, version, method }) {
  return html`<div class="cards">
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
          ${keptFields(method).filter((f) => s[f.name] != null && s[f.name] !== "").map((f) => html`<dt>${titleOf(f)}</dt>
            <dd class="mono" data-testid=${"kept-" + f.name}>${typeof s[f.name] === "object" ? JSON.stringify(s[f.name]) : String(s[f.name])}</dd>`)}
          ${s.commit ? html`<dt>Commit</dt><dd class="mono">${s.commit.slice(0, 12)}</dd>` : null}
          <dt>Release</dt><dd>${s.release ? `${s.release}` : "—"}</dd>
          ${s.custom_domains && s.custom_domains.length ? html`<dt>Domains</dt><dd data-testid="domains">${s.custom_domains.join(", ")}</dd>` : null}
          <dt>Created</dt><dd>${fmtDate(s.created_at)}</dd>
          <dt>Deployed</dt><dd>${fmtDate(s.deployed_at)}</dd>
        </dl>
      </div>
    </div>
    ${can(session, "services:logs") ? html`<${Logs} id=${id} />` : null}
    <${Events} id=${id} version=${version} />`;
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

// --- releases and deploys ---------------------------------------------------------------

// A service's releases (newest first: number, images, commit, when; the details of one;
// roll back to any but the running one) and its deploy history (each job's kind, status,
// release, error and times; cancel a queued or running one). Both read again when the
// service page says a deploy ended or the status changed (`version`).

const PER_PAGE = 20;

function usePage(path, version) {
  const [page, setPage] = useState(1);
  const [list, setList] = useState(null);
  useEffect(() => {
    let live = true;
    api(path, { query: { page, per_page: PER_PAGE } })
      .then((r) => { if (live) setList(r); })
      .catch((e) => { if (live) { showError(e); setList({ data: [], total: 0 }); } });
    return () => { live = false; };
  }, [path, page, version]);
  return [list, page, setPage];
}

function shortImage(i) {
  return `${i.component}: ${i.image}`;
}

export function Releases({ service, session, version, busy, onRollback }) {
  const [list, page, setPage] = usePage(`/api/services/${enc(service.id)}/releases`, version);
  const [open, setOpen] = useState(null); // the release whose details show
  const [confirm, setConfirm] = useState(null);
  const deploy = can(session, "services:deploy");
  const deploying = service.status === "deploying";

  return html`<section class="card" aria-labelledby="releases-title">
    <div class="card-head"><h2 id="releases-title">Releases</h2>
      <span class="muted small">Each deploy, redeploy or rollback that succeeded; roll back runs a release's images, compose and variables again.</span></div>
    ${list === null ? html`<${Loading} />` : list.data.length === 0 ? html`<${Empty}>No release yet: the first deploy that succeeds records release 1.</${Empty}>` : html`
      <ul class="rows releases">
        ${list.data.map((r) => {
          const running = r.number === service.release;
          return html`<li class="row" data-testid="release-row" data-number=${r.number} key=${r.id}>
            <div class="row-main">
              <span class="row-title">Release ${r.number}</span>
              ${running ? html`<span class="badge status-running" data-testid="release-running">running</span>` : null}
              <span class="muted small">${fmtDate(r.created_at)}</span>
            </div>
            <div class="row-meta">
              <span title="Images">${r.images.map(shortImage).join(" · ") || "no image"}</span>
              ${r.commit ? html`<span class="mono" title="Commit">${r.commit.slice(0, 12)}</span>` : null}
            </div>
            <div class="actions">
              <button type="button" class="small ghost" aria-expanded=${open === r.id} data-testid="release-details"
                onClick=${() => setOpen(open === r.id ? null : r.id)}>${open === r.id ? "Hide details" : "Details"}</button>
              ${deploy && !running ? (confirm === r.id ? html`<span class="confirm-inline">
                  <span>Run release ${r.number} again?</span>
                  <button type="button" class="primary small" data-testid="confirm-rollback" disabled=${!!busy || deploying}
                    onClick=${() => { setConfirm(null); onRollback(r.id); }}>Roll back</button>
                  <button type="button" class="small" onClick=${() => setConfirm(null)}>Cancel</button></span>`
                : html`<button type="button" class="small" data-testid="rollback" disabled=${!!busy || deploying}
                    onClick=${() => setConfirm(r.id)}>Roll back to ${r.number}…</button>`) : null}
            </div>
            ${open === r.id ? html`<${ReleaseDetail} serviceId=${service.id} id=${r.id} />` : null}
          </li>`;
        })}
      </ul>
      ${list.total > PER_PAGE ? html`<${Pager} page=${page} perPage=${PER_PAGE} total=${list.total} onPage=${setPage} />` : null}`}
  </section>`;
}

/** One release as GET .../releases/{id} answers it: images with their ids, commit, who, compose, variables. */
function ReleaseDetail({ serviceId, id }) {
  const [r, setR] = useState(null);
  useEffect(() => {
    let live = true;
    api(`/api/services/${enc(serviceId)}/releases/${enc(id)}`).then((x) => { if (live) setR(x); }).catch(showError);
    return () => { live = false; };
  }, [serviceId, id]);
  if (!r) return html`<${Loading} />`;
  const names = Object.keys(r.variables || {});
  return html`<div class="release-detail" data-testid="release-detail">
    <dl class="facts">
      ${r.images.map((i) => html`<dt>${i.component}</dt><dd class="mono">${i.image}${i.image_id ? html`<br /><small class="muted">${i.image_id}</small>` : null}</dd>`)}
      <dt>Commit</dt><dd class="mono">${r.commit || "—"}</dd>
      <dt>Created</dt><dd>${fmtDate(r.created_at)} by ${r.created_by}</dd>
      <dt>Deploy job</dt><dd class="mono">${r.deploy_job_id}</dd>
      <dt>Variables</dt><dd>${names.length ? names.join(", ") : "none"}</dd>
    </dl>
    ${r.compose ? html`<details><summary>Compose</summary><pre class="code">${r.compose}</pre></details>` : null}
  </div>`;
}

export function Deploys({ service, session, version, onChange }) {
  const [list, page, setPage] = usePage(`/api/services/${enc(service.id)}/deploys`, version);
  const [releases] = usePage(`/api/services/${enc(service.id)}/releases`, version);
  const [busy, setBusy] = useState(null);
  const numbers = Object.fromEntries(((releases && releases.data) || []).map((r) => [r.id, r.number]));
  const deploy = can(session, "services:deploy");

  async function cancel(job) {
    setBusy(job.id);
    try {
      await api(`/api/services/${enc(service.id)}/deploys/${enc(job.id)}/cancel`, { method: "POST" });
      onChange();
    } catch (e) {
      showError(e);
    } finally {
      setBusy(null);
    }
  }

  return html`<section class="card" aria-labelledby="deploys-title">
    <div class="card-head"><h2 id="deploys-title">Deploys</h2></div>
    ${list === null ? html`<${Loading} />` : list.data.length === 0 ? html`<${Empty}>No deploys yet.</${Empty}>` : html`
      <ul class="rows deploys">
        ${list.data.map((j) => html`<li class="row" data-testid="deploy-row" data-status=${j.status} key=${j.id}>
          <div class="row-main">
            <span class="row-title">${j.kind}</span>
            <span class=${"badge job-" + j.status} data-testid="deploy-status">${j.status}${j.cancel_requested && j.status === "running" ? " · cancelling" : ""}</span>
            ${j.release_id ? html`<span data-testid="deploy-release">release ${numbers[j.release_id] || j.release_id}</span>` : null}
          </div>
          <div class="row-meta">
            <span title="Started">${fmtDate(j.created_at)}</span>
            <span title="Finished">${j.finished_at ? `finished ${fmtDate(j.finished_at)}` : "not finished"}</span>
            <span class="mono" title="Job">${j.id}</span>
          </div>
          ${j.error ? html`<p class="field-error" data-testid="deploy-error">${j.error}</p>` : null}
          ${deploy && (j.status === "queued" || j.status === "running") && !j.cancel_requested ? html`<div class="actions">
            <button type="button" class="small" data-testid="cancel-deploy" disabled=${busy === j.id} onClick=${() => cancel(j)}>
              ${busy === j.id ? "Cancelling…" : "Cancel"}</button></div>` : null}
        </li>`)}
      </ul>
      ${list.total > PER_PAGE ? html`<${Pager} page=${page} perPage=${PER_PAGE} total=${list.total} onPage=${setPage} />` : null}`}
  </section>`;
}

// --- settings ------------------------------------------------------------------------------

// A service's settings, saved with one PATCH /api/services/{id} carrying only what changed:
// variables (key and value rows; the whole map, of a method whose request takes them, as
// every built-in one does: a git or ai service's are its containers' environment) with which are secret (secret_variables, sent with
// them), its deploy method's fields (settingsFields: what it keeps per service, such as a
// repository's branch, and what else of its request a PATCH takes, such as a compose file;
// each drawn from its schema in the served contract) and custom domains (one per line).
// Domains apply at once; variables and the method's fields at the next redeploy, which
// the page then offers. A stored secret's value is never in the page: its row's value box
// is a password box left empty ("unchanged"), sent back as *** (the server keeps the value)
// unless something is typed in it.

let nextRow = 1;
const MASK = "***";
const rowsOf = (vars, secret) => Object.entries(vars || {}).map(([k, v]) => {
  const hidden = (secret || []).includes(k);
  return { id: nextRow++, key: k, value: hidden ? "" : v, secret: hidden, stored: hidden };
});
const domainsOf = (text) => text.split("\n").map((d) => d.trim()).filter(Boolean);
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

function mapOf(rows) {
  const out = {};
  for (const r of rows) if (r.key.trim()) out[r.key.trim()] = r.stored && r.value === "" ? MASK : r.value;
  return out;
}
const secretsOf = (rows) => [...new Set(rows.filter((r) => r.secret && r.key.trim()).map((r) => r.key.trim()))].sort();

/** A 422's field errors, keyed by the form's fields (`custom_domains[1]` goes to custom_domains). */
function fieldErrors(fields) {
  const out = {};
  for (const [name, message] of Object.entries(fields || {})) {
    const base = name.replace(/\[\d+\]$/, "").split(".")[0];
    out[base] = out[base] ? `${out[base]} ${message}` : message;
  }
  return out;
}

/** The fields of a service's deploy method in its detail (those it keeps per service). */
const keptFields = (method) => (method ? method.fields.filter((f) => method.kept.includes(f.name)) : []);

/** The fields of its deploy method a service's settings show: what it keeps per service and
 * what else of its request a PATCH takes, but the variables (their own editor above) and the
 * deploy key (the Git tab's); read-only where a PATCH cannot change it (a kept field the
 * create requires names the source, which stays). */
function settingsFields(method) {
  if (!method) return [];
  return method.fields.filter((f) => f.name !== "variables" && f.name !== "deploy_key_id"
    && (method.kept.includes(f.name) || method.patchable(f)))
    .map((f) => ({ ...f, readOnly: !method.patchable(f) || (f.required && method.kept.includes(f.name)) }));
}
const valuesOf = (fields, s) => Object.fromEntries(fields.map((f) => [f.name, widgetValue(f, s[f.name])]));

export function Settings({ service, method, onSaved, onRedeploy }) {
  const s = service;
  const fields = settingsFields(method);
  const [vars, setVars] = useState(() => rowsOf(s.variables, s.secret_variables));
  const [values, setValues] = useState(() => valuesOf(fields, s));
  const [domains, setDomains] = useState((s.custom_domains || []).join("\n"));
  const [errors, setErrors] = useState({});
  const [saving, setSaving] = useState(false);
  const [pending, setPending] = useState(null); // what waits for a redeploy, after a save
  const [saved, setSaved] = useState("");
  // its variables, when its method takes them (the four built in do)
  const hasVariables = !method || method.fields.some((f) => f.name === "variables");
  const kept = JSON.stringify(valuesOf(fields, s));

  // another save or a rollback changed the service (or the contract came): start again from what it has
  useEffect(() => {
    setVars(rowsOf(s.variables, s.secret_variables)); setValues(valuesOf(fields, s));
    setDomains((s.custom_domains || []).join("\n"));
  }, [s.id, JSON.stringify(s.variables), JSON.stringify(s.secret_variables), kept, JSON.stringify(s.custom_domains)]);

  function changes() {
    const body = {};
    if (hasVariables && (!same(mapOf(vars), s.variables || {}) || !same(secretsOf(vars), s.secret_variables || []))) {
      body.variables = mapOf(vars); // with which are secret: a secret row removed goes
      body.secret_variables = secretsOf(vars);
    }
    for (const f of fields) {
      if (f.readOnly) continue;
      let now = bodyValue(f, values[f.name]);
      if (typeof now === "string" && !isMultiline(f)) now = now.trim() || undefined;
      // a required one emptied is sent (the server says why); an optional one left empty is not
      if (now === undefined && f.required) now = "";
      if (now !== undefined && !same(now, bodyValue(f, widgetValue(f, s[f.name])))) body[f.name] = now;
    }
    if (!same(domainsOf(domains), s.custom_domains || [])) body.custom_domains = domainsOf(domains);
    return body;
  }

  async function save(e) {
    e.preventDefault();
    const body = changes();
    if (!Object.keys(body).length) { setSaved("Nothing changed."); return; }
    setSaving(true); setErrors({}); setSaved("");
    try {
      const next = await api(`/api/services/${encodeURIComponent(s.id)}`, { method: "PATCH", body });
      clearError();
      const later = ["variables", ...fields.map((f) => f.name)].filter((k) => k in body);
      setPending(later.length ? later : pending);
      setSaved(body.custom_domains ? "Saved. Custom domains are routed now." : "Saved.");
      // a secret's new value leaves the page (its detail, ***, may look as before the save)
      if (body.variables) setVars(rowsOf(next.variables, next.secret_variables));
      onSaved(next);
    } catch (err) {
      if (err.status === 422) {
        const found = fieldErrors(err.fields);
        if (found.secret_variables) found.variables = [found.variables, found.secret_variables].filter(Boolean).join(" ");
        setErrors(found);
      }
      showError(err);
    } finally {
      setSaving(false);
    }
  }

  const label = { variables: "variables", ...Object.fromEntries(fields.map((f) => [f.name, titleOf(f).toLowerCase()])) };
  const setVar = (id, change) => setVars((rows) => rows.map((r) => (r.id === id ? { ...r, ...change } : r)));

  return html`<form class="card settings" onSubmit=${save} aria-labelledby="settings-title" novalidate>
    <h2 id="settings-title">Settings</h2>
    ${hasVariables ? html`<fieldset class=${"field" + (errors.variables ? " invalid" : "")}>
      <legend>Variables <small class="hint">(apply at the next redeploy)</small></legend>
      <div class="kv" data-testid="variables">
        ${vars.map((r) => html`<div class="kv-row" key=${r.id} data-testid="variable-row">
          <input aria-label="Name" placeholder="NAME" value=${r.key} data-testid="variable-key"
            onInput=${(e) => setVar(r.id, { key: e.currentTarget.value })} />
          <input aria-label=${"Value of " + (r.key || "the variable")} value=${r.value} data-testid="variable-value"
            type=${r.secret ? "password" : "text"} autocomplete=${r.secret ? "new-password" : "off"}
            placeholder=${r.stored ? "secret: unchanged (type to replace)" : "value"}
            onInput=${(e) => setVar(r.id, { value: e.currentTarget.value })} />
          <label class="kv-secret" title="Stored encrypted and shown as *** everywhere; read with GET /api/services/{id}/secrets">
            <input type="checkbox" checked=${r.secret} data-testid="variable-secret"
              aria-label=${"Secret " + (r.key || "variable")}
              onChange=${(e) => setVar(r.id, { secret: e.currentTarget.checked })} /> Secret
          </label>
          <button type="button" class="small ghost" aria-label=${"Remove " + (r.key || "this variable")}
            onClick=${() => setVars((rows) => rows.filter((x) => x.id !== r.id))}>✕</button>
        </div>`)}
        <button type="button" class="small" data-testid="add-variable"
          onClick=${() => setVars((rows) => [...rows, { id: nextRow++, key: "", value: "", secret: false, stored: false }])}
          >Add a variable</button>
      </div>
      ${errors.variables ? html`<small class="field-error" data-testid="field-error-variables">${errors.variables}</small>` : null}
    </fieldset>` : null}
    ${fields.map((f) => html`<${SchemaField} key=${f.name} field=${f} value=${values[f.name]} errors=${errors} readOnly=${f.readOnly}
      suffix=${f.readOnly ? " (set at create)" : " (applies at the next redeploy)"}
      onChange=${(v) => setValues((old) => ({ ...old, [f.name]: v }))} />`)}
    <${Field} label="Custom domains" name="custom_domains" error=${errors.custom_domains}
      hint="One host name per line, lower case (shop.example.com); routed as soon as you save. Point each name's DNS at this platform.">
      <textarea id="f-custom_domains" rows="4" data-testid="custom-domains" spellcheck="false" autocapitalize="none"
        value=${domains} onInput=${(e) => setDomains(e.currentTarget.value)}></textarea>
    </${Field}>
    <div class="form-actions">
      <button type="submit" class="primary" data-testid="save-settings" disabled=${saving}>${saving ? "Saving…" : "Save"}</button>
      ${saved ? html`<span role="status" data-testid="settings-saved">${saved}</span>` : null}
    </div>
    ${pending ? html`<div class="notice" role="status" data-testid="needs-redeploy">
      The new ${pending.map((k) => label[k]).join(", ")} apply at the next redeploy.
      ${onRedeploy ? html` <button type="button" class="small primary" data-testid="settings-redeploy"
        onClick=${() => { setPending(null); onRedeploy(); }}>Redeploy now</button>` : " Redeploy once the service is no longer deploying."}
    </div>` : null}
  </form>`;
}
