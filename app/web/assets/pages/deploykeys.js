// Deploy keys (/deploy-keys, keys with services:deploy): the Ed25519 keys Slipway made for
// a customer's git and ai services to clone private repositories over ssh. The list
// (name, customer, fingerprint, the public key with Copy), a form to make one (name, and
// the customer for an admin) and delete (a key still named by a service is refused, 409,
// the answer's message said in its row). The private half is never answered.
import { useEffect, useState } from "../vendor/hooks.mjs";
import { api } from "../api.js";
import { CopyField, Empty, Field, Loading, Pager, can, clearError, fmtDate, html, showError } from "../ui.js";
import { useCustomers } from "./services.js";

const PER_PAGE = 20;

export function DeployKeysPage({ session }) {
  const [list, setList] = useState(null);
  const [page, setPage] = useState(1);
  const [version, setVersion] = useState(0);
  const [created, setCreated] = useState(null);
  const [confirm, setConfirm] = useState(null);
  const [busy, setBusy] = useState(null);
  const [refused, setRefused] = useState({}); // key id -> why its delete was refused
  const customers = useCustomers(session);
  const names = Object.fromEntries(customers.map((c) => [c.id, c.name]));

  useEffect(() => { document.title = "Deploy keys · Slipway"; }, []);
  useEffect(() => {
    let live = true;
    api("/api/deploy-keys", { query: { page, per_page: PER_PAGE } })
      .then((r) => { if (live) setList(r); })
      .catch((e) => { if (live) { showError(e); setList({ data: [], total: 0 }); } });
    return () => { live = false; };
  }, [page, version]);

  async function remove(k) {
    setBusy(k.id);
    setConfirm(null);
    setRefused((r) => ({ ...r, [k.id]: undefined }));
    try {
      await api(`/api/deploy-keys/${encodeURIComponent(k.id)}`, { method: "DELETE" });
      clearError();
      setList((l) => ({ ...l, data: l.data.filter((x) => x.id !== k.id), total: l.total - 1 }));
      if (created && created.id === k.id) setCreated(null);
    } catch (e) {
      if (e.status === 409) setRefused((r) => ({ ...r, [k.id]: e.message }));
      showError(e);
    }
    setBusy(null);
  }

  return html`<section>
    <div class="page-head"><h1>Deploy keys</h1></div>
    <p class="muted">A deploy key lets a git or ai service clone a private repository over ssh: add its public
      key to the repository (GitHub, GitLab, Gitea, Bitbucket: the repository's deploy keys, read-only), then
      choose the key in the service's Git tab. Slipway keeps the private half and never shows it.</p>
    ${created ? html`<div class="card secret" role="status" data-testid="deploy-key-created">
      <h2>Key ${created.name} created</h2>
      <p class="fingerprint">Add this public key to the repository as a read-only deploy key. Fingerprint <span class="mono">${created.fingerprint}</span>.</p>
      <${CopyField} value=${created.public_key} label=${`Public key of ${created.name}`} testid="deploy-key-created-public" multiline />
      <div class="actions"><button type="button" class="small ghost" onClick=${() => setCreated(null)}>Done</button></div>
    </div>` : null}
    <${NewDeployKey} session=${session} customers=${customers}
      onCreated=${(k) => { setCreated(k); setVersion((n) => n + 1); }} />
    ${list === null ? html`<${Loading} />` : list.data.length === 0 ? html`<${Empty}>No deploy keys yet.</${Empty}>` : html`
      <ul class="rows">
        ${list.data.map((k) => html`<li class="row" data-testid="deploy-key-row" data-key-id=${k.id} key=${k.id}>
          <div class="row-main">
            <span class="row-title" data-testid="deploy-key-name">${k.name}</span>
            <span class="mono small fingerprint" data-testid="deploy-key-fingerprint" title="Fingerprint (as ssh-keygen -l prints it)">${k.fingerprint}</span>
          </div>
          <div class="row-meta">
            ${session.customer_id ? null : html`<span title="Customer">${names[k.customer_id] ? `${names[k.customer_id]} (${k.customer_id})` : k.customer_id}</span>`}
            <span class="mono">${k.id}</span>
            <span>Created ${fmtDate(k.created_at)}</span>
          </div>
          <${CopyField} value=${k.public_key} label=${`Public key of ${k.name}`} testid="deploy-key-public" />
          ${refused[k.id] ? html`<p class="field-error" role="alert" data-testid="deploy-key-error">${refused[k.id]}</p>` : null}
          <div class="actions">
            ${confirm === k.id ? html`<span class="confirm-inline">
                <span>Delete ${k.name}? Services cloning with it could no longer.</span>
                <button type="button" class="danger small" data-testid="deploy-key-confirm" disabled=${busy === k.id}
                  onClick=${() => remove(k)}>Delete</button>
                <button type="button" class="small" onClick=${() => setConfirm(null)}>Cancel</button></span>`
              : html`<button type="button" class="small ghost danger-text" data-testid="deploy-key-delete" disabled=${busy === k.id}
                  aria-label=${`Delete deploy key ${k.name}`} onClick=${() => setConfirm(k.id)}>${busy === k.id ? "Deleting…" : "Delete…"}</button>`}
          </div>
        </li>`)}
      </ul>
      ${list.total > PER_PAGE ? html`<${Pager} page=${page} perPage=${PER_PAGE} total=${list.total} onPage=${setPage} />` : null}`}
  </section>`;
}

function NewDeployKey({ session, customers, onCreated }) {
  const [name, setName] = useState("");
  const [customerId, setCustomerId] = useState(session.customer_id || "");
  const [errors, setErrors] = useState({});
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    if (!customerId && customers.length) setCustomerId(customers[0].id);
  }, [customers]);

  async function submit(e) {
    e.preventDefault();
    setBusy(true); setErrors({});
    const body = { name };
    if (!session.customer_id && customerId.trim()) body.customer_id = customerId.trim();
    try {
      const k = await api("/api/deploy-keys", { method: "POST", body });
      clearError();
      setName("");
      onCreated(k);
    } catch (err) {
      setErrors(err.fields || {});
      showError(err);
    }
    setBusy(false);
  }

  return html`<form class="card form-grid" onSubmit=${submit} noValidate aria-labelledby="new-deploy-key-title">
    <h2 id="new-deploy-key-title" class="wide">New deploy key</h2>
    <${Field} label="Name" name="name" error=${errors.name} hint="What it is for, e.g. the repository's name">
      <input id="f-name" data-testid="deploy-key-field-name" value=${name} maxlength="100"
        onInput=${(e) => setName(e.currentTarget.value)} />
    </${Field}>
    <${Field} label="Customer" name="customer_id" error=${errors.customer_id}>
      ${session.customer_id ? html`<input id="f-customer_id" data-testid="deploy-key-field-customer" value=${session.customer_id} readOnly />`
        : customers.length ? html`<select id="f-customer_id" data-testid="deploy-key-field-customer" value=${customerId}
            onChange=${(e) => setCustomerId(e.currentTarget.value)}>
            ${customers.map((c) => html`<option value=${c.id}>${c.name} (${c.id})</option>`)}
          </select>`
        : html`<input id="f-customer_id" data-testid="deploy-key-field-customer" placeholder="cust_…" value=${customerId}
            onInput=${(e) => setCustomerId(e.currentTarget.value)} />`}
    </${Field}>
    <div class="form-actions wide">
      <button type="submit" class="primary" data-testid="deploy-key-create" disabled=${busy}>${busy ? "Creating…" : "Create key"}</button>
    </div>
  </form>`;
}
