// Backups of a service: list, create, restore, verify, delete, with progress from the
// real-time channel's backup.progress messages applied to the rows in place. Each row says
// where its archive is (the destination) and whether it verified. "Back up now" only for
// a service with volumes (the detail's `volumes`): without any there is nothing to archive.
import { useEffect, useRef, useState } from "../vendor/hooks.mjs";
import { api, on } from "../api.js";
import { Empty, Loading, can, clearError, fmtBytes, fmtDate, html, showError } from "../ui.js";

export function Backups({ id, session, status, volumes = [] }) {
  const [backups, setBackups] = useState(null);
  const [busy, setBusy] = useState(null);
  const [confirm, setConfirm] = useState(null); // {kind: "restore"|"delete", id}
  const listRef = useRef(null);
  listRef.current = backups;
  const base = `/api/services/${encodeURIComponent(id)}/backups`;
  const write = can(session, "backups:write");

  async function load() {
    try {
      const r = await api(base, { query: { per_page: 20 } });
      setBackups(r.data);
    } catch (e) {
      showError(e);
      setBackups([]);
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
    load();
    return on("backup.progress", (d) => {
      if (d.service_id !== id) return;
      const list = listRef.current || [];
      if (!list.some((b) => b.id === d.backup_id)) { load(); return; }
      setBackups((old) => old.map((b) => {
        if (b.id !== d.backup_id) return b;
        if (d.operation === "restore") return { ...b, restore: { ...(b.restore || {}), status: d.status, progress: d.progress } };
        if (d.operation === "verify") return { ...b, verify_status: d.status };
        return { ...b, status: d.status, progress: d.progress };
      }));
      if (d.status === "completed" || d.status === "failed") refreshOne(d.backup_id);
    });
  }, [id]);

  async function run(kind, backupId) {
    setBusy(kind + (backupId || ""));
    setConfirm(null);
    try {
      if (kind === "create") {
        const b = await api(base, { method: "POST" });
        setBackups((list) => [b, ...(list || []).filter((x) => x.id !== b.id)]);
      } else if (kind === "restore" || kind === "verify") {
        const b = await api(`${base}/${encodeURIComponent(backupId)}/${kind}`, { method: "POST" });
        setBackups((list) => list.map((x) => (x.id === b.id ? b : x)));
      } else if (kind === "delete") {
        await api(`${base}/${encodeURIComponent(backupId)}`, { method: "DELETE" });
        setBackups((list) => list.filter((x) => x.id !== backupId));
      }
      clearError();
    } catch (e) {
      showError(e);
    } finally {
      setBusy(null);
    }
  }

  const working = (backups || []).some((b) => b.status === "pending" || b.status === "running"
    || (b.restore && (b.restore.status === "pending" || b.restore.status === "running")));

  return html`<section class="card" aria-labelledby="backups-title">
    <div class="card-head">
      <h2 id="backups-title">Backups</h2>
      ${write && volumes.length ? html`<button type="button" data-testid="backup-create" disabled=${!!busy || working || status === "deploying"}
        onClick=${() => run("create")}>${busy === "create" ? "Starting…" : "Back up now"}</button>` : null}
    </div>
    ${volumes.length ? html`<p class="muted small">Volumes backed up: ${volumes.join(", ")}.</p>`
      : html`<p class="muted small" data-testid="no-volumes">This service has no volumes: there is nothing to back up.</p>`}
    ${backups === null ? html`<${Loading} />` : backups.length === 0 ? html`<${Empty}>No backups yet.</${Empty}>` : html`
      <ul class="rows backups">
        ${backups.map((b) => html`<li class="row" data-testid="backup-row" key=${b.id}>
          <div class="row-main">
            <span class="row-title">${fmtDate(b.created_at)}</span>
            <span class=${"badge backup-" + b.status}>${b.status}</span>
          </div>
          <div class="row-meta">
            <span>${b.status === "completed" ? fmtBytes(b.size_bytes) : `${b.progress || 0} %`}</span>
            ${b.volumes && b.volumes.length ? html`<span title="Volumes">${b.volumes.join(", ")}</span>` : null}
            ${b.destination ? html`<span title="Destination" data-testid="backup-destination">${b.destination}</span>` : null}
            ${b.kind && b.kind !== "volumes" ? html`<span title="Kind">${b.kind}</span>` : null}
            ${b.verify_status === "pending" || b.verify_status === "running" ? html`<span>Verifying…</span>`
              : b.verified_at && b.status === "completed" ? html`<span data-testid="backup-verified">Verified ${fmtDate(b.verified_at)}</span>` : null}
            ${b.restore ? html`<span>Restore: ${b.restore.status}${b.restore.status === "running" || b.restore.status === "pending" ? ` ${b.restore.progress || 0} %` : ""}</span>` : null}
          </div>
          ${b.status === "pending" || b.status === "running" ? html`<progress max="100" value=${b.progress || 0} aria-label="Backup progress"></progress>` : null}
          ${b.restore && (b.restore.status === "pending" || b.restore.status === "running") ? html`<progress max="100" value=${b.restore.progress || 0} aria-label="Restore progress"></progress>` : null}
          ${b.error ? html`<p class="field-error">${b.error}</p>` : null}
          ${b.restore && b.restore.error ? html`<p class="field-error">Restore failed: ${b.restore.error}</p>` : null}
          ${write ? html`<div class="actions">
            ${confirm && confirm.id === b.id ? html`
              <span>${confirm.kind === "restore" ? "Replace the volumes with this backup?" : "Delete this backup?"}</span>
              <button type="button" class="danger" onClick=${() => run(confirm.kind, b.id)}>${confirm.kind === "restore" ? "Restore" : "Delete"}</button>
              <button type="button" onClick=${() => setConfirm(null)}>Cancel</button>` : html`
              <button type="button" class="small" disabled=${!!busy || working || b.status !== "completed"} onClick=${() => setConfirm({ kind: "restore", id: b.id })}>Restore…</button>
              <button type="button" class="small" data-testid="backup-verify" disabled=${!!busy || b.status !== "completed"
                || b.verify_status === "pending" || b.verify_status === "running"
                || (b.restore && (b.restore.status === "pending" || b.restore.status === "running"))}
                onClick=${() => run("verify", b.id)}>${busy === "verify" + b.id ? "Verifying…" : "Verify"}</button>
              <button type="button" class="small ghost" disabled=${!!busy || b.status === "pending" || b.status === "running"} onClick=${() => setConfirm({ kind: "delete", id: b.id })}>Delete…</button>`}
          </div>` : null}
        </li>`)}
      </ul>`}
  </section>`;
}
