// Shared pieces: the htm binding, the error toast, status badges, fields, pagination
// and formatting. Everything shown from the API is rendered as text (Preact escapes it).
import { h } from "./vendor/preact.mjs";
import { useEffect, useRef, useState } from "./vendor/hooks.mjs";
import htm from "./vendor/htm.mjs";

export const html = htm.bind(h);

/** What a session may do: its permissions (the role's minus the denied ones). */
export function can(session, ...permissions) {
  return !!session && Array.isArray(session.permissions) && permissions.every((p) => session.permissions.includes(p));
}

// --- the error toast: every failed action shows the API's error.message -------------

const errorListeners = new Set();
let lastError = null;

/** Show a failed action's message (an ApiError, an Error or a string). */
export function showError(error) {
  lastError = { message: (error && error.message) || String(error), at: Date.now() };
  for (const fn of errorListeners) fn(lastError);
}
export function clearError() {
  if (lastError === null) return;
  lastError = null;
  for (const fn of errorListeners) fn(null);
}

export function ErrorToast() {
  const [error, setError] = useState(lastError);
  useEffect(() => {
    errorListeners.add(setError);
    setError(lastError);
    return () => errorListeners.delete(setError);
  }, []);
  if (!error) return null;
  return html`<div class="toast" role="alert">
    <p data-testid="error-message">${error.message}</p>
    <button type="button" class="ghost small" onClick=${clearError} aria-label="Dismiss the message">✕</button>
  </div>`;
}

// --- small components -----------------------------------------------------------------

export function StatusBadge({ status }) {
  return html`<span class=${"badge status-" + (status || "unknown")} data-testid="service-status">${status || "unknown"}</span>`;
}

/** A labelled form control with its 422 field error beside it. */
export function Field({ label, name, error, hint, children, wide }) {
  return html`<div class=${"field" + (wide ? " wide" : "") + (error ? " invalid" : "")}>
    <label for=${"f-" + name}>${label}</label>
    ${children}
    ${hint && !error ? html`<small class="hint" id=${"h-" + name}>${hint}</small>` : null}
    ${error ? html`<small class="field-error" id=${"e-" + name} data-testid=${"field-error-" + name}>${error}</small>` : null}
  </div>`;
}

/** ``value`` in a read-only field (select it to copy by hand) and a Copy button that
 * writes it to the clipboard; when the browser has no clipboard or refuses, the text is
 * selected in the field and the page says to copy it from there. */
export function CopyField({ id, value, label, testid, multiline = false }) {
  const field = useRef(null);
  const [said, setSaid] = useState("");
  useEffect(() => { setSaid(""); }, [value]);

  function selectIt() {
    const el = field.current;
    if (el) { el.focus(); el.select(); }
  }

  async function copy() {
    try {
      if (!navigator.clipboard) throw new Error("no clipboard");
      await navigator.clipboard.writeText(value);
      setSaid("Copied.");
    } catch (e) {
      selectIt();
      setSaid("The browser did not allow copying: the text is selected in the field, copy it from there.");
    }
  }

  const props = { id, ref: field, readOnly: true, value, "aria-label": label, "data-testid": testid, spellcheck: false,
    class: "mono copy-value", onFocus: selectIt };
  return html`<div class="copy-field">
    ${multiline ? html`<textarea rows="3" ...${props}></textarea>` : html`<input ...${props} />`}
    <div class="copy-actions">
      <button type="button" class="small" data-testid=${testid + "-copy"} onClick=${copy}>Copy</button>
      ${said ? html`<span class="small muted" role="status" data-testid=${testid + "-copied"}>${said}</span>` : null}
    </div>
  </div>`;
}

export function Pager({ page, perPage, total, onPage }) {
  const pages = Math.max(1, Math.ceil(total / perPage));
  return html`<nav class="pager" aria-label="Pages">
    <button type="button" data-testid="page-prev" disabled=${page <= 1} onClick=${() => onPage(page - 1)}>← Previous</button>
    <span aria-live="polite">Page ${page} of ${pages} · ${total} in all</span>
    <button type="button" data-testid="page-next" disabled=${page >= pages} onClick=${() => onPage(page + 1)}>Next →</button>
  </nav>`;
}

export function Progress({ value, label }) {
  return html`<div class="progress-line">
    <progress max="100" value=${Math.max(0, Math.min(100, value || 0))} aria-label=${label}></progress>
    <span>${label}</span>
  </div>`;
}

export function Empty({ children }) { return html`<p class="empty">${children}</p>`; }

export function Loading() { return html`<p class="loading" aria-busy="true">Loading…</p>`; }

/** A link target from the API only when it is http(s): never a javascript: or data: URL. */
export function safeUrl(url) {
  return typeof url === "string" && /^https?:\/\//i.test(url) ? url : null;
}

// --- formatting -------------------------------------------------------------------------

export function fmtDate(value) {
  if (!value) return "—";
  const d = new Date(value);
  if (isNaN(d)) return String(value);
  return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

export function fmtTime(value) {
  const d = new Date(value);
  if (isNaN(d)) return "";
  return d.toLocaleTimeString(undefined, { hour12: false });
}

export function fmtBytes(n) {
  if (!n) return "0 B";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

export function fmtNumber(n, digits = 0) {
  return typeof n === "number" && isFinite(n) ? n.toFixed(digits) : "—";
}

/** "CPU 2.1 % · 48 / 512 MB" from a service's resources. */
export function fmtResources(r) {
  if (!r) return "—";
  return `CPU ${fmtNumber(r.cpu_usage, 1)} % · ${fmtNumber(r.memory_usage_mb)} / ${fmtNumber(r.memory_limit_mb)} MB`;
}

/** Debounce a value (search boxes): the value after it stopped changing for `ms`. */
export function useDebounced(value, ms) {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const t = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(t);
  }, [value, ms]);
  return settled;
}
