// API keys: list, create (the full key shown once), revoke.
import { useEffect, useState } from "../vendor/hooks.mjs";
import { api } from "../api.js";
import { Empty, Field, Loading, Pager, can, clearError, fmtDate, html, showError } from "../ui.js";
import { useCustomers } from "./services.js";

const PER_PAGE = 20;
const ROLES = ["admin", "customer", "viewer"];
// The contract's Permission enum (core's, not a plugin's): listed here so the keys page
// needs no 60 KB contract download.
const PERMISSIONS = ["services:read", "services:create", "services:operate", "services:deploy", "services:delete",
  "services:logs", "services:secrets", "customers:read", "customers:write", "templates:read", "api_keys:manage",
  "backups:read", "backups:write"];

export function KeysPage({ session }) {
  const [list, setList] = useState(null);
  const [page, setPage] = useState(1);
  const [version, setVersion] = useState(0);
  const [created, setCreated] = useState(null);
  const [busy, setBusy] = useState(null);

  useEffect(() => { document.title = "API keys · Slipway"; }, []);
  useEffect(() => {
    let live = true;
    api("/api/v1/api-keys", { query: { page, per_page: PER_PAGE } })
      .then((r) => { if (live) setList(r); })
      .catch((e) => { if (live) { showError(e); setList({ data: [], total: 0 }); } });
    return () => { live = false; };
  }, [page, version]);

  async function revoke(k) {
    setBusy(k.id);
    try {
      await api(`/api/v1/api-keys/${encodeURIComponent(k.id)}`, { method: "DELETE" });
      clearError();
      setList((l) => ({ ...l, data: l.data.filter((x) => x.id !== k.id), total: l.total - 1 }));
      if (created && created.id === k.id) setCreated(null);
    } catch (e) { showError(e); }
    setBusy(null);
  }

  const own = session.key && session.key.id;
  return html`<section>
    <div class="page-head"><h1>API keys</h1></div>
    ${created ? html`<div class="card secret" role="status">
      <h2>Key ${created.name} created</h2>
      <p>Copy it now: it is shown only this once.</p>
      <div class="secret-line">
        <code data-testid="key-secret" class="mono">${created.key}</code>
        ${navigator.clipboard ? html`<button type="button" class="small" onClick=${() => navigator.clipboard.writeText(created.key).catch(showError)}>Copy</button>` : null}
        <button type="button" class="small ghost" onClick=${() => setCreated(null)}>Done</button>
      </div>
    </div>` : null}
    <${NewKey} session=${session} onCreated=${(k) => { setCreated(k); setVersion((n) => n + 1); }} />
    ${list === null ? html`<${Loading} />` : list.data.length === 0 ? html`<${Empty}>No keys.</${Empty}>` : html`
      <ul class="rows">
        ${list.data.map((k) => html`<li class="row" data-testid="key-row" key=${k.id}>
          <div class="row-main">
            <span class="row-title">${k.name}</span>
            <span class="badge role">${k.role}</span>
            ${k.id === own ? html`<span class="badge">this session</span>` : null}
          </div>
          <div class="row-meta">
            <span class="mono">${k.keyPrefix}…</span>
            ${k.customerId ? html`<span>${k.customerId}</span>` : null}
            <span>${k.rateLimitRpm}/min</span>
            <span>Expires ${k.expiresAt ? fmtDate(k.expiresAt) : "never"}</span>
            ${k.deniedPermissions.length ? html`<span>Denied: ${k.deniedPermissions.join(", ")}</span>` : null}
            <span>Created ${fmtDate(k.createdAt)}</span>
          </div>
          <div class="actions">
            <button type="button" class="small ghost danger-text" data-testid="key-revoke" disabled=${busy === k.id}
              aria-label=${`Revoke key ${k.name}`} onClick=${() => revoke(k)}>${busy === k.id ? "Revoking…" : "Revoke"}</button>
          </div>
        </li>`)}
      </ul>
      ${list.total > PER_PAGE ? html`<${Pager} page=${page} perPage=${PER_PAGE} total=${list.total} onPage=${setPage} />` : null}`}
  </section>`;
}

function NewKey({ session, onCreated }) {
  const permissions = PERMISSIONS;
  const [form, setForm] = useState({ name: "", role: session.customer_id ? "customer" : "viewer", rateLimitRpm: "", expiresAt: "", denied: [], customerId: session.customer_id || "" });
  const [errors, setErrors] = useState({});
  const [busy, setBusy] = useState(false);
  const customers = useCustomers(session);
  const set = (k, v) => setForm((f) => ({ ...f, [k]: v }));

  async function submit(e) {
    e.preventDefault();
    setBusy(true); setErrors({});
    const rpm = String(form.rateLimitRpm).trim();
    const body = { name: form.name, role: form.role };
    if (rpm) body.rateLimitRpm = /^\d+$/.test(rpm) ? parseInt(rpm, 10) : rpm; // empty: the operator's default
    if (form.denied.length) body.deniedPermissions = form.denied;
    if (form.expiresAt) { const d = new Date(form.expiresAt); body.expiresAt = isNaN(d) ? form.expiresAt : d.toISOString(); }
    if (form.role === "customer" && form.customerId) body.customerId = form.customerId;
    try {
      const k = await api("/api/v1/api-keys", { method: "POST", body });
      clearError();
      setForm((f) => ({ ...f, name: "", denied: [], expiresAt: "" }));
      onCreated(k);
    } catch (err) { setErrors(err.fields || {}); showError(err); }
    setBusy(false);
  }

  return html`<form class="card form-grid" onSubmit=${submit} noValidate aria-labelledby="new-key-title">
    <h2 id="new-key-title" class="wide">New key</h2>
    <${Field} label="Name" name="name" error=${errors.name}>
      <input id="f-name" data-testid="field-name" value=${form.name} onInput=${(e) => set("name", e.currentTarget.value)} />
    </${Field}>
    <${Field} label="Role" name="role" error=${errors.role}>
      <select id="f-role" data-testid="field-role" value=${form.role} onChange=${(e) => set("role", e.currentTarget.value)}>
        ${ROLES.map((r) => html`<option value=${r}>${r}</option>`)}
      </select>
    </${Field}>
    ${form.role === "customer" ? html`<${Field} label="Customer" name="customerId" error=${errors.customerId}>
      ${session.customer_id ? html`<input id="f-customerId" data-testid="field-customerId" value=${session.customer_id} readOnly />`
        : customers.length ? html`<select id="f-customerId" data-testid="field-customerId" value=${form.customerId} onChange=${(e) => set("customerId", e.currentTarget.value)}>
            <option value="">Choose…</option>
            ${customers.map((c) => html`<option value=${c.id}>${c.name} (${c.id})</option>`)}
          </select>`
        : html`<input id="f-customerId" data-testid="field-customerId" placeholder="cust_…" value=${form.customerId} onInput=${(e) => set("customerId", e.currentTarget.value)} />`}
    </${Field}>` : null}
    <${Field} label="Requests per minute" name="rateLimitRpm" error=${errors.rateLimitRpm} hint="Empty: the panel's default (at most your own key's)">
      <input id="f-rateLimitRpm" data-testid="field-rateLimitRpm" type="number" min="1" step="1" value=${form.rateLimitRpm} onInput=${(e) => set("rateLimitRpm", e.currentTarget.value)} />
    </${Field}>
    <${Field} label="Expires" name="expiresAt" error=${errors.expiresAt} hint="Empty: never (within your own key's bounds)">
      <input id="f-expiresAt" data-testid="field-expiresAt" type="datetime-local" value=${form.expiresAt} onInput=${(e) => set("expiresAt", e.currentTarget.value)} />
    </${Field}>
    ${permissions.length ? html`<fieldset class="wide checks" data-testid="field-deniedPermissions">
      <legend>Denied permissions</legend>
      ${permissions.map((p) => html`<label class="check"><input type="checkbox" checked=${form.denied.includes(p)}
        onChange=${(e) => set("denied", e.currentTarget.checked ? [...form.denied, p] : form.denied.filter((x) => x !== p))} /> <span class="mono">${p}</span></label>`)}
      ${errors.deniedPermissions ? html`<small class="field-error" data-testid="field-error-deniedPermissions">${errors.deniedPermissions}</small>` : null}
    </fieldset>` : null}
    <div class="form-actions wide">
      <button type="submit" class="primary" data-testid="key-create" disabled=${busy}>${busy ? "Creating…" : "Create key"}</button>
    </div>
  </form>`;
}
