// Sign in: with an API key always (POST /api/auth/key sets the session cookie), and
// through the identity provider when the server says OIDC is configured.
import { useState } from "../vendor/hooks.mjs";
import { api } from "../api.js";
import { Field, clearError, html, showError } from "../ui.js";

export function SignIn({ oidc, next, onSignedIn }) {
  const [key, setKey] = useState("");
  const [busy, setBusy] = useState(false);
  const [fieldError, setFieldError] = useState("");

  async function submit(e) {
    e.preventDefault();
    setBusy(true);
    setFieldError("");
    try {
      await api("/api/auth/key", { method: "POST", body: { key: key.trim() }, quiet401: true });
      clearError();
      setKey("");
      await onSignedIn(next || "/");
    } catch (err) {
      if (err.fields && err.fields.key) setFieldError(err.fields.key);
      showError(err);
    } finally {
      setBusy(false);
    }
  }

  return html`<main id="main" class="signin">
    <div class="card signin-card">
      <h1><img class="logo" src="/assets/slipway.svg" alt="" width="32" height="32" /> Slipway</h1>
      <p class="muted">Sign in to the hosting panel.</p>
      <form onSubmit=${submit}>
        <${Field} label="API key" name="key" error=${fieldError} hint="slw_… — the key is kept only as a session cookie.">
          <input id="f-key" name="key" type="password" autocomplete="off" spellcheck="false" required
            data-testid="api-key" value=${key} onInput=${(e) => setKey(e.currentTarget.value)}
            aria-invalid=${fieldError ? "true" : undefined} />
        </${Field}>
        <button type="submit" class="primary" data-testid="sign-in" disabled=${busy}>${busy ? "Signing in…" : "Sign in"}</button>
      </form>
      ${oidc ? html`<div class="or"><span>or</span></div>
        <a class="button" href=${"/api/auth/login?next=" + encodeURIComponent(next || "/")} data-external
          onClick=${() => { try { localStorage.setItem("slipway.signed-in", "1"); } catch (e) { /* private mode */ } }}>Sign in with your identity provider</a>` : null}
    </div>
  </main>`;
}
