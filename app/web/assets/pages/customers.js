// Customers with their limits: list (search, pages), create, edit limits, delete.
import { useEffect, useState } from "../vendor/hooks.mjs";
import { api } from "../api.js";
import { Empty, Field, Loading, Pager, can, clearError, fmtDate, html, showError, useDebounced } from "../ui.js";

const PER_PAGE = 20;
const LIMITS = [
  ["services", "Services", "integer"],
  ["memory_mb", "Memory (MB)", "integer"],
  ["cpus", "CPUs", "number"],
];

function limitsBody(form) {
  const out = {};
  for (const [k, , type] of LIMITS) {
    const v = String(form[k] ?? "").trim();
    out[k] = v === "" ? null : type === "integer" && /^\d+$/.test(v) ? parseInt(v, 10) : isFinite(Number(v)) ? Number(v) : v;
  }
  return out;
}

function LimitInputs({ prefix, form, set, errors }) {
  return LIMITS.map(([k, label]) => html`<${Field} key=${k} label=${label} name=${prefix + "limits." + k} error=${errors["limits." + k]} hint="Empty: the default">
    <input id=${"f-" + prefix + "limits." + k} type="number" min="0" step=${k === "cpus" ? "0.001" : "1"} inputMode="decimal"
      value=${form[k] ?? ""} onInput=${(e) => set(k, e.currentTarget.value)} placeholder="default" />
  </${Field}>`);
}

export function CustomersPage({ session }) {
  const [list, setList] = useState(null);
  const [page, setPage] = useState(1);
  const [searchText, setSearchText] = useState("");
  const search = useDebounced(searchText, 300);
  const [version, setVersion] = useState(0);
  const [editing, setEditing] = useState(null);
  const write = can(session, "customers:write");

  useEffect(() => { document.title = "Customers · Slipway"; }, []);
  useEffect(() => { setPage(1); }, [search]);
  useEffect(() => {
    let live = true;
    api("/api/customers", { query: { page, per_page: PER_PAGE, sort: "name", search } })
      .then((r) => { if (live) setList(r); })
      .catch((e) => { if (live) { showError(e); setList({ data: [], total: 0 }); } });
    return () => { live = false; };
  }, [page, search, version]);

  async function remove(c) {
    try {
      await api(`/api/customers/${encodeURIComponent(c.id)}`, { method: "DELETE" });
      clearError();
      setVersion((n) => n + 1);
    } catch (e) { showError(e); }
  }

  return html`<section>
    <div class="page-head"><h1>Customers</h1></div>
    ${write ? html`<${NewCustomer} onCreated=${() => setVersion((n) => n + 1)} />` : null}
    <div class="filters">
      <div class="field">
        <label for="f-customer-search">Search</label>
        <input id="f-customer-search" type="search" placeholder="Name contains…" value=${searchText} onInput=${(e) => setSearchText(e.currentTarget.value)} />
      </div>
    </div>
    ${list === null ? html`<${Loading} />` : list.data.length === 0 ? html`<${Empty}>No customers${search ? " match" : " yet"}.</${Empty}>` : html`
      <ul class="rows">
        ${list.data.map((c) => html`<li class="row" data-testid="customer-row" key=${c.id}>
          <div class="row-main">
            <span class="row-title">${c.name}</span>
            <span class="muted mono small">${c.id}</span>
          </div>
          <div class="row-meta">
            ${c.email ? html`<span>${c.email}</span>` : null}
            <span>Services ${c.limits.services ?? "default"}</span>
            <span>Memory ${c.limits.memory_mb ?? "default"}${c.limits.memory_mb !== null ? " MB" : ""}</span>
            <span>CPUs ${c.limits.cpus ?? "default"}</span>
            <span>Since ${fmtDate(c.created_at)}</span>
          </div>
          ${write ? (editing === c.id
            ? html`<${EditLimits} customer=${c} onDone=${(changed) => { setEditing(null); if (changed) setVersion((n) => n + 1); }} />`
            : html`<div class="actions">
                <button type="button" class="small" onClick=${() => setEditing(c.id)}>Edit limits</button>
                <${ConfirmButton} label="Delete" confirm=${`Delete ${c.name}?`} onConfirm=${() => remove(c)} />
              </div>`) : null}
        </li>`)}
      </ul>
      ${list.total > PER_PAGE ? html`<${Pager} page=${page} perPage=${PER_PAGE} total=${list.total} onPage=${setPage} />` : null}`}
  </section>`;
}

export function ConfirmButton({ label, confirm, onConfirm, testid, confirmTestid }) {
  const [asking, setAsking] = useState(false);
  if (!asking) return html`<button type="button" class="small ghost danger-text" data-testid=${testid} onClick=${() => setAsking(true)}>${label}…</button>`;
  return html`<span class="confirm-inline" role="group" aria-label=${confirm}>
    <span>${confirm}</span>
    <button type="button" class="small danger" data-testid=${confirmTestid} onClick=${() => { setAsking(false); onConfirm(); }}>${label}</button>
    <button type="button" class="small" onClick=${() => setAsking(false)}>Cancel</button>
  </span>`;
}

function NewCustomer({ onCreated }) {
  const [open, setOpen] = useState(false);
  const [form, setForm] = useState({});
  const [errors, setErrors] = useState({});
  const [busy, setBusy] = useState(false);
  const set = (k, v) => setForm((f) => ({ ...f, [k]: v }));

  async function submit(e) {
    e.preventDefault();
    setBusy(true); setErrors({});
    const body = { name: form.name || "", limits: limitsBody(form) };
    if (form.email) body.email = form.email;
    try {
      await api("/api/customers", { method: "POST", body });
      clearError();
      setForm({}); setOpen(false);
      onCreated();
    } catch (err) { setErrors(err.fields || {}); showError(err); }
    setBusy(false);
  }

  if (!open) return html`<p><button type="button" class="primary" onClick=${() => setOpen(true)}>New customer</button></p>`;
  return html`<form class="card form-grid" onSubmit=${submit} noValidate aria-label="New customer">
    <${Field} label="Name" name="name" error=${errors.name}>
      <input id="f-name" data-testid="field-name" value=${form.name || ""} onInput=${(e) => set("name", e.currentTarget.value)} />
    </${Field}>
    <${Field} label="Email" name="email" error=${errors.email}>
      <input id="f-email" type="email" data-testid="field-email" value=${form.email || ""} onInput=${(e) => set("email", e.currentTarget.value)} />
    </${Field}>
    <${LimitInputs} prefix="" form=${form} set=${set} errors=${errors} />
    <div class="form-actions wide">
      <button type="submit" class="primary" disabled=${busy}>Create customer</button>
      <button type="button" class="ghost" onClick=${() => setOpen(false)}>Cancel</button>
    </div>
  </form>`;
}

function EditLimits({ customer, onDone }) {
  const [form, setForm] = useState({ ...customer.limits });
  const [errors, setErrors] = useState({});
  const set = (k, v) => setForm((f) => ({ ...f, [k]: v }));
  const prefix = customer.id + "-";
  async function submit(e) {
    e.preventDefault();
    try {
      await api(`/api/customers/${encodeURIComponent(customer.id)}`, { method: "PATCH", body: { limits: limitsBody(form) } });
      clearError();
      onDone(true);
    } catch (err) { setErrors(err.fields || {}); showError(err); }
  }
  return html`<form class="form-grid inline-form" onSubmit=${submit} noValidate aria-label=${"Limits of " + customer.name}>
    <${LimitInputs} prefix=${prefix} form=${form} set=${set} errors=${errors} />
    <div class="form-actions wide">
      <button type="submit" class="primary small">Save limits</button>
      <button type="button" class="small ghost" onClick=${() => onDone(false)}>Cancel</button>
    </div>
  </form>`;
}
