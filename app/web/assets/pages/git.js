// The Git tab (?tab=git) of a service whose deploy method deploys on push or has previews
// (its capabilities in the served contract): the deploy key its ssh clones use (PATCH
// deploy_key_id), the ssh host key its clones pinned (PATCH ssh_host_key null forgets it), deploy on push (the webhook URL to give the git provider, a new webhook
// secret shown once, the auto_deploy switch) and, when its method has previews, preview environments
// (the previews and previews_from_forks switches and the list of previews, one per pull
// request). Deploy on push is drawn when its method deploys on push and the service's
// detail has `webhook_url`.
import { useEffect, useState } from "../vendor/hooks.mjs";
import { api } from "../api.js";
import { CopyField, Empty, Field, Loading, can, clearError, html, showError } from "../ui.js";
import { useDeployKeys } from "../pickers.js";

const enc = encodeURIComponent;

/** A 422's field errors by the field they name. */
function fieldErrors(err) {
  return err.status === 422 && err.fields ? { ...err.fields } : {};
}

/** PATCH /api/services/{id} with ``body``: the new detail, or null (errors said). */
async function patch(service, body, setErrors) {
  setErrors({});
  try {
    const next = await api(`/api/services/${enc(service.id)}`, { method: "PATCH", body });
    clearError();
    return next;
  } catch (err) {
    setErrors(fieldErrors(err));
    showError(err);
    return null;
  }
}

export function Git({ service, session, version, pushes, previews, onSaved }) {
  const s = service;
  const deploy = can(session, "services:deploy");
  const push = pushes && Object.prototype.hasOwnProperty.call(s, "webhook_url") && s.webhook_url !== null;
  return html`<div class="git-tab">
    ${deploy ? html`<${DeployKey} service=${s} session=${session} onSaved=${onSaved} />` : null}
    ${Object.prototype.hasOwnProperty.call(s, "ssh_host_key") ? html`<${HostKey} service=${s} deploy=${deploy} onSaved=${onSaved} />` : null}
    ${deploy && push ? html`<${Push} service=${s} onSaved=${onSaved} />` : null}
    ${previews && !s.preview_of ? html`<${Previews} service=${s} deploy=${deploy} version=${version} onSaved=${onSaved} />` : null}
  </div>`;
}

/** The deploy key picker: the keys of the service's customer, or none. */
export function DeployKeySelect({ keys, value, onChange, testid, id, invalid }) {
  const known = (keys || []).some((k) => k.id === value);
  return html`<select id=${id} data-testid=${testid} value=${value || ""} aria-invalid=${invalid ? "true" : undefined}
      onChange=${(e) => onChange(e.currentTarget.value)}>
    <option value="">None (public repository, or credentials in the URL)</option>
    ${value && !known ? html`<option value=${value}>${value}</option>` : null}
    ${(keys || []).map((k) => html`<option value=${k.id}>${k.name} (${k.fingerprint})</option>`)}
  </select>`;
}

function DeployKey({ service, session, onSaved }) {
  const s = service;
  const keys = useDeployKeys(session, s.customer_id);
  const [chosen, setChosen] = useState(s.deploy_key_id || "");
  const [errors, setErrors] = useState({});
  const [saving, setSaving] = useState(false);
  const [saved, setSaved] = useState("");
  useEffect(() => { setChosen(s.deploy_key_id || ""); }, [s.id, s.deploy_key_id]);
  const key = (keys || []).find((k) => k.id === chosen);

  async function save(e) {
    e.preventDefault();
    setSaved("");
    if ((chosen || null) === (s.deploy_key_id || null)) { setSaved("Nothing changed."); return; }
    setSaving(true);
    const next = await patch(s, { deploy_key_id: chosen || null }, setErrors);
    setSaving(false);
    if (next) { setSaved("Saved. The next deploy clones with it."); onSaved(next); }
  }

  return html`<form class="card" onSubmit=${save} aria-labelledby="deploy-key-title" noValidate data-testid="git-deploy-key">
    <h2 id="deploy-key-title">Deploy key</h2>
    <p class="muted small">The ssh key this service clones its repository with (a <span class="mono">git@…</span> or <span class="mono">ssh://</span> URL).
      Make one on the <a href="/deploy-keys">Deploy keys</a> page and add its public key to the
      repository.</p>
    ${keys === null ? html`<${Loading} />` : html`
      <${Field} label="Key" name="deploy_key_id" error=${errors.deploy_key_id}>
        <${DeployKeySelect} id="f-deploy_key_id" testid="git-deploy-key-select" keys=${keys} value=${chosen}
          invalid=${!!errors.deploy_key_id} onChange=${setChosen} />
      </${Field}>
      ${keys.length === 0 ? html`<p class="small muted" data-testid="git-no-deploy-keys">This customer has no deploy key yet.</p>` : null}
      ${key ? html`<p class="small fingerprint">Fingerprint <span class="mono" data-testid="git-deploy-key-fingerprint">${key.fingerprint}</span></p>
        <${CopyField} value=${key.public_key} label=${`Public key of ${key.name}`} testid="git-deploy-key-public" />` : null}
      <div class="form-actions">
        <button type="submit" class="primary" data-testid="git-deploy-key-save" disabled=${saving}>${saving ? "Saving…" : "Save key"}</button>
        ${saved ? html`<span role="status" data-testid="git-deploy-key-saved">${saved}</span>` : null}
      </div>`}
  </form>`;
}

/** The ssh host key the service's clones pinned (its fingerprint) and, with
 * services:deploy, Forget (PATCH ssh_host_key null: the next clone pins what it is shown). */
function HostKey({ service, deploy, onSaved }) {
  const s = service;
  const [errors, setErrors] = useState({});
  const [busy, setBusy] = useState(false);

  async function forget() {
    setBusy(true);
    const next = await patch(s, { ssh_host_key: null }, setErrors);
    setBusy(false);
    if (next) onSaved(next);
  }

  return html`<div class="card" data-testid="git-host-key">
    <h2>SSH host key</h2>
    ${s.ssh_host_key
      ? html`<p class="small fingerprint">Pinned <span class="mono" data-testid="git-host-key-fingerprint">${s.ssh_host_key}</span></p>
        <p class="muted small">Every ssh clone must be shown this key; another fails the deploy with “host key changed”.
          Compare it with the fingerprint your git host publishes. Forget it only when the server's key was replaced on purpose.</p>
        ${deploy ? html`<div class="form-actions"><button type="button" data-testid="git-host-key-forget" disabled=${busy} onClick=${forget}>${busy ? "Forgetting…" : "Forget host key"}</button></div>` : null}`
      : html`<p class="muted small" data-testid="git-host-key-none">None pinned yet: the next ssh clone pins the key the server shows (https clones have none).</p>`}
    ${errors.ssh_host_key ? html`<small class="field-error" data-testid="field-error-ssh_host_key">${errors.ssh_host_key}</small>` : null}
  </div>`;
}

/** One switch of the service, saved (PATCH) as soon as it changes; a refused change is
 * said next to it and the switch goes back. */
function Switch({ service, name, label, hint, testid, onSaved }) {
  const [errors, setErrors] = useState({});
  const [busy, setBusy] = useState(false);
  const [value, setValue] = useState(!!service[name]);
  const [saved, setSaved] = useState(null); // the value last saved here
  useEffect(() => { setValue(!!service[name]); }, [service.id, service[name]]);

  async function flip(e) {
    const on = e.currentTarget.checked;
    setValue(on); setBusy(true); setSaved(null);
    const next = await patch(service, { [name]: on }, setErrors);
    setBusy(false);
    if (next) { setSaved(!!next[name]); onSaved(next); } else setValue(!!service[name]);
  }

  return html`<div class=${"field switch" + (errors[name] ? " invalid" : "")}>
    <label class="check"><input type="checkbox" id=${"f-" + name} data-testid=${testid} checked=${value}
      disabled=${busy} aria-invalid=${errors[name] ? "true" : undefined} onChange=${flip} /> ${label}</label>
    ${hint ? html`<small class="hint" data-testid=${testid + "-hint"}>${typeof hint === "function" ? hint(value) : hint}</small>` : null}
    ${errors[name] ? html`<small class="field-error" id=${"e-" + name} data-testid=${"field-error-" + name}>${errors[name]}</small>` : null}
    ${saved !== null ? html`<small role="status" data-testid=${testid + "-saved"}>Saved: ${saved ? "on" : "off"}.</small>` : null}
  </div>`;
}

/** The webhook URL, a new secret (shown once) and the auto_deploy switch. */
function Push({ service, onSaved }) {
  const s = service;
  const [secret, setSecret] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => { setSecret(null); }, [s.id]);
  // without SLIPWAY_PUBLIC_URL the server gives the path alone: the address this page is served from
  const url = s.webhook_url.startsWith("/") ? location.origin + s.webhook_url : s.webhook_url;

  async function newSecret() {
    setBusy(true);
    try {
      const r = await api(`/api/services/${enc(s.id)}/webhook-secret`, { method: "POST" });
      clearError();
      setSecret(r.secret);
    } catch (err) {
      showError(err);
    }
    setBusy(false);
  }

  return html`<section class="card" aria-labelledby="push-title" data-testid="git-push">
    <h2 id="push-title">Deploy on push</h2>
    <p class="muted small">Add a webhook for push events to the repository (GitHub, GitLab, Gitea or Forgejo,
      Bitbucket) with this URL, content type JSON, and the secret below: a push to the tracked branch then
      redeploys the service.</p>
    <${Field} label="Webhook URL" name="webhook_url">
      <${CopyField} id="f-webhook_url" value=${url} label="Webhook URL" testid="git-webhook-url" />
    </${Field}>
    <div class="actions">
      <button type="button" data-testid="git-webhook-secret-new" disabled=${busy} onClick=${newSecret}>
        ${busy ? "Making…" : "New webhook secret"}</button>
      <span class="small muted">A new secret replaces the previous one at once.</span>
    </div>
    ${secret ? html`<div class="card secret" role="status" data-testid="git-webhook-secret">
      <p><strong>The webhook's new secret.</strong> Copy it into the repository's webhook now: it will not be shown again.</p>
      <${CopyField} value=${secret} label="Webhook secret" testid="git-webhook-secret-value" />
      <div class="actions"><button type="button" class="small ghost" onClick=${() => setSecret(null)}>Done</button></div>
    </div>` : null}
    <${Switch} service=${s} name="auto_deploy" label="Redeploy on each push to the tracked branch" testid="git-auto-deploy"
      hint=${(on) => (on ? "On: each push to the tracked branch redeploys the service."
        : "Off: pushes are received and ignored.")} onSaved=${onSaved} />
  </section>`;
}

/** The previews switches and the list of the previews (one service per pull request). */
function Previews({ service, deploy, version, onSaved }) {
  const s = service;
  const [list, setList] = useState(null);
  useEffect(() => {
    let live = true;
    api(`/api/services/${enc(s.id)}/previews`, { query: { per_page: 100 } })
      .then((r) => { if (live) setList(r); })
      .catch((e) => { if (live) { showError(e); setList({ data: [], total: 0 }); } });
    return () => { live = false; };
  }, [s.id, version, s.previews]);

  return html`<section class="card" aria-labelledby="previews-title" data-testid="git-previews">
    <h2 id="previews-title">Preview environments</h2>
    <p class="muted small">A pull (merge) request opened against the tracked branch gets a service of its
      own, <span class="mono">${s.name}-pr-N</span>, deployed from the request's head with this service's variables
      plus <span class="mono">SLIPWAY_PREVIEW=1</span>; closing or merging the request deletes it. The repository's
      webhook (see deploy on push) sends pull request events.</p>
    ${deploy ? html`<div class="checks-col">
      <${Switch} service=${s} name="previews" label="Deploy a preview of each pull request" testid="git-previews-switch" onSaved=${onSaved} />
      <${Switch} service=${s} name="previews_from_forks" label="Also of pull requests from forks" testid="git-previews-forks"
        hint=${(on) => (on ? "On: requests from forks (anyone's code) are deployed too."
          : "Off: requests from forks (anyone's code) are not deployed.")} onSaved=${onSaved} />
    </div>` : html`<p class="small" data-testid="git-previews-state">Previews are ${s.previews ? "on" : "off"}${s.previews && s.previews_from_forks ? ", forks included" : ""}.</p>`}
    <h3>Previews</h3>
    ${list === null ? html`<${Loading} />` : list.data.length === 0 ? html`<${Empty}>No previews: no pull request is open with previews on.</${Empty}>` : html`
      <ul class="rows previews">
        ${list.data.map((p) => html`<li class="row" data-testid="preview-row" key=${p.id}>
          <div class="row-main">
            <a class="row-title" href=${"/services/" + enc(p.id)} data-testid="preview-link">${p.name}</a>
            <span data-testid="preview-number">PR #${p.preview_number}</span>
            <span class=${"badge status-" + (p.status || "unknown")} data-testid="preview-status">${p.status}</span>
          </div>
          <div class="row-meta">
            ${p.git_branch ? html`<span title="The pull request's branch" class="mono">${p.git_branch}</span>` : null}
            <span class="mono" title="Commit" data-testid="preview-commit">${p.commit ? p.commit.slice(0, 12) : "not deployed yet"}</span>
          </div>
        </li>`)}
      </ul>`}
  </section>`;
}
