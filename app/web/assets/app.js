// The shell: session, navigation, routes. Loaded by index.html as the only entry module.
import { render } from "./vendor/preact.mjs";
import { useEffect, useRef, useState } from "./vendor/hooks.mjs";
import { api, connectRealtime, disconnectRealtime, setSocketEndedHandler, setUnauthorizedHandler } from "./api.js";
import { interceptLinks, navigate, useRoute } from "./router.js";
import { ErrorToast, can, clearError, html, showError, Loading } from "./ui.js";
import { SignIn } from "./pages/signin.js";
import { ServicesPage } from "./pages/services.js";
import { ServicePage } from "./pages/service.js";
import { CreatePage } from "./pages/create.js";
import { CustomersPage } from "./pages/customers.js";
import { KeysPage } from "./pages/keys.js";
import { TemplatesPage } from "./pages/templates.js";

const oidcMeta = document.querySelector('meta[name="slipway-oidc"]');
const OIDC = !!oidcMeta && oidcMeta.getAttribute("content") === "on";

const NAV = [
  { path: "/services", label: "Services", testid: "nav-services", needs: ["services:read"] },
  { path: "/create", label: "Create", testid: "nav-create", needs: ["services:create", "services:deploy"] },
  { path: "/templates", label: "Templates", testid: "nav-templates", needs: ["templates:read"] },
  { path: "/customers", label: "Customers", testid: "nav-customers", needs: ["customers:read"], adminOnly: true },
  { path: "/keys", label: "API keys", testid: "nav-keys", needs: ["api_keys:manage"] },
];

function allowed(session, item) {
  return can(session, ...item.needs) && !(item.adminOnly && session.customer_id);
}

function pageFor(route, session) {
  const { path } = route;
  const m = path.match(/^\/services\/([^/]+)$/);
  if (m) return can(session, "services:read") ? html`<${ServicePage} id=${decodeURIComponent(m[1])} session=${session} />` : null;
  const item = NAV.find((n) => n.path === path);
  if (!item) return undefined;
  if (!allowed(session, item)) return null;
  switch (path) {
    case "/services": return html`<${ServicesPage} session=${session} query=${route.query} />`;
    case "/create": return html`<${CreatePage} session=${session} query=${route.query} />`;
    case "/templates": return html`<${TemplatesPage} session=${session} />`;
    case "/customers": return html`<${CustomersPage} session=${session} />`;
    case "/keys": return html`<${KeysPage} session=${session} />`;
  }
  return undefined;
}

function homeFor(session) {
  const first = NAV.find((n) => allowed(session, n));
  return first ? first.path : "/services";
}

function Shell({ session, onSignOut }) {
  const route = useRoute();
  const main = useRef(null);
  const lastPath = useRef(route.path);

  useEffect(() => {
    if (route.path === "/" || route.path === "/sign-in") {
      navigate(route.query.get("next") && route.path === "/sign-in" ? safeNext(route.query.get("next")) : homeFor(session), { replace: true });
    }
  }, [route.path]);

  useEffect(() => {
    if (lastPath.current !== route.path) {
      lastPath.current = route.path;
      clearError();
      if (main.current) main.current.focus({ preventScroll: true });
      window.scrollTo(0, 0);
    }
    // on a narrow screen the menu scrolls sideways: keep the current page's entry in view
    const current = document.querySelector('.mainnav a[aria-current="page"]');
    if (current && current.scrollIntoView) current.scrollIntoView({ block: "nearest", inline: "nearest" });
  }, [route.path]);

  const page = route.path === "/" || route.path === "/sign-in" ? html`<${Loading} />` : pageFor(route, session);
  const who = session.key ? `key ${session.key.name}` : session.email || "signed in";
  return html`
    <a class="skip" href="#main">Skip to content</a>
    <header class="topbar">
      <a class="brand" href=${homeFor(session)}><img class="logo" src="/assets/slipway.svg" alt="" width="24" height="24" /> Slipway</a>
      <nav class="mainnav" aria-label="Main">
        ${NAV.filter((n) => allowed(session, n)).map((n) => html`
          <a href=${n.path} data-testid=${n.testid}
             aria-current=${route.path === n.path || (n.path === "/services" && route.path.startsWith("/services/")) ? "page" : undefined}>${n.label}</a>`)}
      </nav>
      <div class="who">
        <span class="who-name" title=${who}>${who}</span>
        <span class="badge role">${session.role}</span>
        <button type="button" class="ghost small" data-testid="sign-out" onClick=${onSignOut}>Sign out</button>
      </div>
    </header>
    <main id="main" tabindex="-1" ref=${main}>
      ${page === undefined ? html`<section><h1>Not found</h1><p>There is no page at this address. <a href=${homeFor(session)}>Go to the start page</a>.</p></section>`
        : page === null ? html`<section><h1>Not allowed</h1><p>Your key or role does not allow this page.</p></section>`
        : page}
    </main>
    <${ErrorToast} />`;
}

// The session cookie is HttpOnly, so the page cannot see it. A flag in localStorage says
// "a sign-in happened in this browser": without it the page shows the sign-in form at
// once instead of asking GET /api/auth/session for a 401 (no request it does not need).
const HINT = "slipway.signed-in";
export function hasHint() { try { return localStorage.getItem(HINT) === "1"; } catch (e) { return true; } }
export function setHint(on) {
  try { if (on) localStorage.setItem(HINT, "1"); else localStorage.removeItem(HINT); } catch (e) { /* private mode */ }
}

/** Only a path on this panel may be a sign-in's destination. */
function safeNext(next) {
  return next && /^\/(?![/\\])[\x20-\x7e]*$/.test(next) && !next.startsWith("/api/") ? next : "/";
}

function App() {
  const [session, setSession] = useState(undefined);
  const route = useRoute();

  async function loadSession() {
    if (!hasHint()) { setSession(null); return null; }
    try {
      const s = await api("/api/auth/session", { quiet401: true });
      setSession(s);
      return s;
    } catch (e) {
      if (e.status !== 401 && e.status !== 404) showError(e);
      else setHint(false);
      setSession(null);
      return null;
    }
  }

  useEffect(() => {
    loadSession();
    setUnauthorizedHandler(() => { setHint(false); setSession(null); });
    setSocketEndedHandler(() => loadSession());
  }, []);

  useEffect(() => {
    if (session && can(session, "services:read")) connectRealtime();
    else disconnectRealtime();
  }, [session]);

  useEffect(() => {
    if (session === null && route.path !== "/sign-in") {
      const next = route.path === "/" ? "" : `?next=${encodeURIComponent(route.path + location.search)}`;
      navigate(`/sign-in${next}`, { replace: true });
    }
  }, [session, route.path]);

  async function signOut() {
    try {
      await api("/api/auth/logout", { method: "POST", quiet401: true });
    } catch (e) {
      if (e.status !== 401) { showError(e); return; }
    }
    disconnectRealtime();
    setHint(false);
    setSession(null);
    navigate("/sign-in", { replace: true });
  }

  if (session === undefined) return html`<${Loading} />`;
  if (session === null) {
    return html`<${SignIn} oidc=${OIDC} next=${safeNext(route.query.get("next"))}
      onSignedIn=${async (next) => { setHint(true); const s = await loadSession(); if (s) navigate(next === "/" ? homeFor(s) : next, { replace: true }); }} />
      <${ErrorToast} />`;
  }
  return html`<${Shell} session=${session} onSignOut=${signOut} />`;
}

const root = document.getElementById("app");
interceptLinks(root);
render(html`<${App} />`, root);
