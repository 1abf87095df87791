// Backups of a service: the list (destination, kind, size, verified), "Back up now" to a
// destination, restore here or as a new service, verify, delete, and the backup policy
// form (schedule, destination, keep_last, verify). Progress comes from the real-time
// channel's backup.progress messages, applied to the rows in place. "Back up now" only for
// a service with volumes (the detail's `volumes`): without any there is nothing to back up.
import { useEffect, useRef, useState } from "../vendor/hooks.mjs";
import { api, on } from "../api.js";
import { navigate } from "../router.js";
import { Empty, Field, Loading, can, clearError, fmtBytes, fmtDate, html, showError } from "../ui.js";

const BUSY = ["pending", "running"];

/** What a backup's row says about its verification. */
function verification(b) {
  if (BUSY.includes(b.verify_status)) return html`<span data-testid="backup-verifying">Verifying…</span>`;
  if (b.verify_error) return html`<span class="field-error" data-testid="backup-verify-error">Verification failed: ${b.verify_error}</span>`;
  if (b.verified_at) return html`<span data-testid="backup-verified" title=${b.verified_at}>Verified ${fmtDate(b.verified_at)}</span>`;
  return html`<span class="muted" data-testid="backup-unverified">Not verified</span>`;
}

export function Backups({ id, session, status, volumes = [] }) {
  const [backups, setBackups] = useState(null);
  const [busy, setBusy] = useState(null);
  const [confirm, setConfirm] = useState(null); // {kind: "restore"|"restore-new"|"delete", id}
  const [newName, setNewName] = useState("");
  const [destination, setDestination] = useState("");
  const [errors, setErrors] = useState({});
  // the policy as the list answered it first (null: none): the list says whether there is
  // one, so no GET .../backup-policy is asked for a 404; later loads leave the form alone
  const [policy, setPolicy] = useState(undefined);
  const listRef = useRef(null);
  listRef.current = backups;
  const base = `/api/services/${encodeURIComponent(id)}/backups`;
  const write = can(session, "backups:write");

  async function load() {
    try {
      const r = await api(base, { query: { per_page: 20 } });
      setBackups(r.data);
      setPolicy((known) => (known === undefined ? r.policy || null : known));
    } catch (e) {
      showError(e);
      setBackups([]);
      setPolicy((known) => (known === undefined ? null : known));
    }
  }

  async function refreshOne(backupId) {
    try {
      const b = await api(`${base}/${encodeURIComponent(backupId)}`);
      setBackups((list) => (list || []).map((x) => (x.id === b.id ? b : x)));
    } catch (e) { /* gone meanwhile: the list shows what it had */ }
  }

  useEffect(() => {
    setBackups(null);
    setPolicy(undefined);
    load();
    return on("backup.progress", (d) => {
      if (d.service_id !== id) return;
      const list = listRef.current || [];
      if (!list.some((b) => b.id === d.backup_id)) { load(); return; }
      setBackups((old) => old.map((b) => {
        if (b.id !== d.backup_id) return b;
        if (d.operation === "restore") {
          const step = d.step ? (d.part ? `${d.step} ${d.part}` : d.step) : (b.restore || {}).step;
          return { ...b, restore: { ...(b.restore || {}), status: d.status, progress: d.progress, step } };
        }
        if (d.operation === "verify") return { ...b, verify_status: d.status };
        return { ...b, status: d.status, progress: d.progress };
      }));
      if (d.status === "completed" || d.status === "failed") refreshOne(d.backup_id);
    });
  }, [id]);

  async function run(kind, backupId) {
    setBusy(kind + (backupId || ""));
    setConfirm(null);
    setErrors({});
    const one = backupId ? `${base}/${encodeURIComponent(backupId)}` : base;
    try {
      if (kind === "create") {
        const b = await api(base, { method: "POST", body: destination.trim() ? { destination: destination.trim() } : {} });
        setBackups((list) => [b, ...(list || []).filter((x) => x.id !== b.id)]);
      } else if (kind === "restore") {
        const b = await api(`${one}/restore`, { method: "POST" });
        setBackups((list) => list.map((x) => (x.id === b.id ? b : x)));
      } else if (kind === "restore-new") {
        const b = await api(`${one}/restore`, { method: "POST", body: { target: "new", name: newName.trim() } });
        setBackups((list) => list.map((x) => (x.id === b.id ? b : x)));
        if (b.restored_service_id) navigate(`/services/${encodeURIComponent(b.restored_service_id)}`);
      } else if (kind === "verify") {
        const b = await api(`${one}/verify`, { method: "POST" });
        setBackups((list) => list.map((x) => (x.id === b.id ? b : x)));
      } else if (kind === "delete") {
        await api(one, { method: "DELETE" });
        setBackups((list) => list.filter((x) => x.id !== backupId));
      }
      clearError();
    } catch (e) {
      const fields = Object.keys(e.fields).length;
      if (kind === "restore-new" && (e.status === 409 || (e.status === 422 && fields))) {
        // a refused or taken name: said next to it, the form kept open to try another
        setErrors(fields ? e.fields : { name: e.message });
        setConfirm({ kind, id: backupId });
      } else if (e.status === 422 && fields) setErrors(e.fields);
      else showError(e);
    } finally {
      setBusy(null);
    }
  }

  const working = (backups || []).some((b) => BUSY.includes(b.status) || (b.restore && BUSY.includes(b.restore.status)));
  const known = [...new Set((backups || []).map((b) => b.destination).filter(Boolean))];

  function actions(b) {
    if (confirm && confirm.id === b.id && confirm.kind === "restore-new") {
      return html`<form class="inline-form" data-testid="restore-new-form" onSubmit=${(e) => { e.preventDefault(); run("restore-new", b.id); }}>
        <${Field} label="New service's name" name="restore-name" error=${errors.name}>
          <input id="f-restore-name" data-testid="restore-new-name" required value=${newName} onInput=${(e) => setNewName(e.target.value)} />
        </${Field}>
        <button type="submit" data-testid="restore-new-confirm" disabled=${!!busy}>Restore as a new service</button>
        <button type="button" onClick=${() => setConfirm(null)}>Cancel</button>
      </form>`;
    }
    if (confirm && confirm.id === b.id) {
      return html`<span>${confirm.kind === "restore" ? "Replace this service's data with this backup?" : "Delete this backup?"}</span>
        <button type="button" class="danger" data-testid="backup-confirm" onClick=${() => run(confirm.kind, b.id)}>${confirm.kind === "restore" ? "Restore" : "Delete"}</button>
        <button type="button" onClick=${() => setConfirm(null)}>Cancel</button>`;
    }
    const done = b.status === "completed";
    return html`
      <button type="button" class="small" data-testid="backup-restore" disabled=${!!busy || working || !done || BUSY.includes(b.verify_status)} onClick=${() => setConfirm({ kind: "restore", id: b.id })}>Restore here…</button>
      <button type="button" class="small" data-testid="backup-restore-new" disabled=${!!busy || !done} onClick=${() => { setErrors({}); setConfirm({ kind: "restore-new", id: b.id }); }}>Restore as new…</button>
      <button type="button" class="small" data-testid="backup-verify" disabled=${!!busy || !done || BUSY.includes(b.verify_status)} onClick=${() => run("verify", b.id)}>Verify</button>
      <button type="button" class="small ghost" data-testid="backup-delete" disabled=${!!busy || BUSY.includes(b.status)} onClick=${() => setConfirm({ kind: "delete", id: b.id })}>Delete…</button>`;
  }

  return html`<section class="card" aria-labelledby="backups-title">
    <div class="card-head">
      <h2 id="backups-title">Backups</h2>
      ${write && volumes.length ? html`<form class="inline-form" onSubmit=${(e) => { e.preventDefault(); run("create"); }}>
        <input aria-label="Destination" placeholder="default destination" data-testid="backup-create-destination" list="backup-destinations"
          value=${destination} onInput=${(e) => setDestination(e.target.value)} />
        <button type="submit" data-testid="backup-create" disabled=${!!busy || working || status === "deploying"}>${busy === "create" ? "Starting…" : "Back up now"}</button>
      </form>` : null}
    </div>
    ${errors.destination && !confirm ? html`<p class="field-error" data-testid="field-error-destination">${errors.destination}</p>` : null}
    <datalist id="backup-destinations">${known.map((d) => html`<option value=${d} />`)}</datalist>
    ${volumes.length ? html`<p class="muted small">Volumes backed up: ${volumes.join(", ")}.</p>`
      : html`<p class="muted small" data-testid="no-volumes">This service has no volumes: there is nothing to back up.</p>`}
    ${backups === null ? html`<${Loading} />` : backups.length === 0 ? html`<${Empty}>No backups yet.</${Empty}>` : html`
      <ul class="rows backups">
        ${backups.map((b) => html`<li class="row" data-testid="backup-row" data-backup-id=${b.id} key=${b.id}>
          <div class="row-main">
            <span class="row-title">${fmtDate(b.created_at)}</span>
            <span class=${"badge backup-" + b.status} data-testid="backup-status">${b.status}</span>
            ${b.scheduled ? html`<span class="badge" title="Made by the backup policy">scheduled</span>` : null}
          </div>
          <div class="row-meta">
            <span data-testid="backup-destination" title="Destination">${b.destination || "local"}</span>
            <span data-testid="backup-kind" title="Kind">${b.kind || "volumes"}</span>
            <span data-testid="backup-size">${b.status === "completed" ? fmtBytes(b.size_bytes) : `${b.progress || 0} %`}</span>
            ${b.status === "completed" ? verification(b) : null}
            ${b.restore ? html`<span data-testid="backup-restore-status">Restore: ${b.restore.status}${BUSY.includes(b.restore.status) ? ` ${b.restore.progress || 0} %${b.restore.step ? ` (${b.restore.step})` : ""}` : ""}</span>` : null}
            ${b.restored_service_id ? html`<a href=${"/services/" + encodeURIComponent(b.restored_service_id)}>Restored service</a>` : null}
          </div>
          ${BUSY.includes(b.status) ? html`<progress max="100" value=${b.progress || 0} aria-label="Backup progress"></progress>` : null}
          ${b.restore && BUSY.includes(b.restore.status) ? html`<progress max="100" value=${b.restore.progress || 0} aria-label="Restore progress"></progress>` : null}
          ${b.error ? html`<p class="field-error" data-testid="backup-error">${b.error}</p>` : null}
          ${b.restore && b.restore.error ? html`<p class="field-error">Restore failed: ${b.restore.error}</p>` : null}
          ${write ? html`<div class="actions">${actions(b)}</div>` : null}
        </li>`)}
      </ul>`}
  </section>
  ${policy === undefined ? html`<section class="card"><${Loading} /></section>`
    : html`<${Policy} key=${id} id=${id} write=${write} known=${known} initial=${policy} />`}`;
}

const NEW_POLICY = { schedule: "0 3 * * *", destination: "", keep_last: 7, verify: true };

function policyForm(p) {
  return p ? { schedule: p.schedule, destination: p.destination || "", keep_last: p.keep_last, verify: !!p.verify } : NEW_POLICY;
}

/** The service's backup policy (``initial``: the backups list's `policy`, null for none):
 * PUT to save, DELETE to remove. */
function Policy({ id, write, known, initial }) {
  const url = `/api/services/${encodeURIComponent(id)}/backup-policy`;
  const [policy, setPolicy] = useState(initial); // null: none
  const [form, setForm] = useState(policyForm(initial));
  const [errors, setErrors] = useState({});
  const [saving, setSaving] = useState(false);
  const [saved, setSaved] = useState(false);

  const set = (name) => (e) => setForm({ ...form, [name]: e.target.type === "checkbox" ? e.target.checked : e.target.value });

  async function save(e) {
    e.preventDefault();
    setSaving(true);
    setErrors({});
    setSaved(false);
    const body = { schedule: form.schedule.trim(), keep_last: Number(form.keep_last), verify: form.verify };
    if (form.destination.trim()) body.destination = form.destination.trim();
    try {
      const p = await api(url, { method: "PUT", body });
      setPolicy(p);
      setForm(policyForm(p));
      setSaved(true);
      clearError();
    } catch (err) {
      if (err.status === 422 && Object.keys(err.fields).length) setErrors(err.fields);
      else showError(err);
    } finally {
      setSaving(false);
    }
  }

  async function remove() {
    setSaving(true);
    try {
      await api(url, { method: "DELETE" });
      setPolicy(null);
      setSaved(false);
      clearError();
    } catch (err) {
      showError(err);
    } finally {
      setSaving(false);
    }
  }

  return html`<section class="card" aria-labelledby="policy-title" data-testid="backup-policy">
    <div class="card-head"><h2 id="policy-title">Backup policy</h2></div>
    <p class="muted small" data-testid="policy-summary">${policy
      ? `Backs up on "${policy.schedule}" (UTC) to ${policy.destination}, keeps the last ${policy.keep_last}${policy.verify ? ", verifies each" : ""}.`
      : "No policy: backups are made only when asked for."}</p>
    ${write ? html`<form class="form-grid" noValidate onSubmit=${save}>
      <${Field} label="Schedule (cron, UTC)" name="schedule" error=${errors.schedule} hint="Five fields: minute hour day month weekday">
        <input id="f-schedule" data-testid="policy-schedule" required value=${form.schedule} onInput=${set("schedule")} />
      </${Field}>
      <${Field} label="Destination" name="policy-destination" error=${errors.destination} hint="Empty: the default destination">
        <input id="f-policy-destination" data-testid="policy-destination" list="backup-destinations" value=${form.destination} onInput=${set("destination")} />
      </${Field}>
      <${Field} label="Keep the last" name="keep_last" error=${errors.keep_last}>
        <input id="f-keep_last" data-testid="policy-keep-last" type="number" min="1" max="365" required value=${form.keep_last} onInput=${set("keep_last")} />
      </${Field}>
      <${Field} label="Verify each backup" name="verify" error=${errors.verify}>
        <input id="f-verify" data-testid="policy-verify" type="checkbox" checked=${form.verify} onChange=${set("verify")} />
      </${Field}>
      <div class="actions">
        <button type="submit" data-testid="policy-save" disabled=${saving}>${saving ? "Saving…" : "Save policy"}</button>
        ${policy ? html`<button type="button" class="ghost" data-testid="policy-remove" disabled=${saving} onClick=${remove}>Remove policy</button>` : null}
        ${saved ? html`<span role="status" data-testid="policy-saved">Saved.</span>` : null}
      </div>
    </form>` : null}
  </section>`;
}
