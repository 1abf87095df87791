// The shell: session, navigation, routes. Imported by boot.js, which says so when it fails
// to load. Each page's code is imported when the page opens (PAGES), so a first load
// fetches the shell and the page it shows, nothing else.
import { render } from "./vendor/preact.mjs";
import { useEffect, useRef, useState } from "./vendor/hooks.mjs";
import { api, connectRealtime, disconnectRealtime, setSocketEndedHandler, setUnauthorizedHandler } from "./api.js";
import { interceptLinks, navigate, useRoute } from "./router.js";
import { ErrorToast, can, clearError, html, showError, Loading } from "./ui.js";

/** Each page's module, imported on first use; the browser imports a module once. */
const PAGES = {
  signin: (query) => import("./pages/signin.js" + query),
  services: (query) => import("./pages/services.js" + query),
  service: (query) => import("./pages/service.js" + query),
  create: (query) => import("./pages/create.js" + query),
  customers: (query) => import("./pages/customers.js" + query),
  keys: (query) => import("./pages/keys.js" + query),
  "deploy-keys": (query) => import("./pages/deploykeys.js" + query),
  templates: (query) => import("./pages/templates.js" + query),
};
/** A page's code that failed to arrive is asked for again after these pauses (ms), before
 * the page says it did not load: one dropped connection (a server closing an idle
 * keep-alive connection as the request goes out) is no failure. The browser remembers a
 * failed import of an address, so each try asks with its own query. */
const IMPORT_RETRIES = [250, 1000];
const loaded = new Map(); // page name -> its module, once imported (shown without a "Loading" frame)

function importPage(name, attempt = 0) {
  return PAGES[name](attempt ? `?attempt=${attempt}` : "").catch((error) => {
    if (attempt >= IMPORT_RETRIES.length) throw error;
    return new Promise((done) => setTimeout(done, IMPORT_RETRIES[attempt])).then(() => importPage(name, attempt + 1));
  });
}

function loadPage(name) {
  return importPage(name).then((module) => { loaded.set(name, module); return module; });
}

/** The page ``name``, drawn by ``draw(module)`` once its code is here; when the code does
 * not load (the network changed), a message and a button that loads the page again. */
function Lazy({ name, draw }) {
  const [module, setModule] = useState(() => loaded.get(name));
  const [failed, setFailed] = useState(null);
  useEffect(() => {
    if (module) return undefined;
    let live = true;
    loadPage(name).then((m) => { if (live) setModule(m); }, (e) => { if (live) setFailed(e); });
    return () => { live = false; };
  }, [name]);
  if (failed) {
    return html`<section class="load-failed" data-testid="page-load-failed" role="alert">
      <h1>This page's code did not load</h1>
      <p>The network may have changed, or the server may be restarting.</p>
      <p><button type="button" class="primary" data-testid="page-load-retry" onClick=${() => location.reload()}>Retry</button></p>
      <p class="muted small">${String(failed.message || failed)}</p>
    </section>`;
  }
  return module ? draw(module) : html`<${Loading} />`;
}

function page(name, draw) {
  return html`<${Lazy} key=${name} name=${name} draw=${draw} />`;
}

/** Pages the server serves itself, which a sign-in may return to (a full load, not a route). */
const SERVER_PAGES = ["/api/docs"];

const oidcMeta = document.querySelector('meta[name="slipway-oidc"]');
const OIDC = !!oidcMeta && oidcMeta.getAttribute("content") === "on";

const NAV = [
  { path: "/services", label: "Services", testid: "nav-services", needs: ["services:read"] },
  { path: "/create", label: "Create", testid: "nav-create", needs: ["services:create", "services:deploy"] },
  { path: "/templates", label: "Templates", testid: "nav-templates", needs: ["templates:read"] },
  { path: "/customers", label: "Customers", testid: "nav-customers", needs: ["customers:read"], adminOnly: true },
  { path: "/deploy-keys", label: "Deploy keys", testid: "nav-deploy-keys", needs: ["services:deploy"] },
  { path: "/keys", label: "API keys", testid: "nav-keys", needs: ["api_keys:manage"] },
];

function allowed(session, item) {
  return can(session, ...item.needs) && !(item.adminOnly && session.customer_id);
}

function pageFor(route, session) {
  const { path } = route;
  const m = path.match(/^\/services\/([^/]+)$/);
  if (m) {
    return can(session, "services:read")
      ? page("service", ({ ServicePage }) => html`<${ServicePage} id=${decodeURIComponent(m[1])} session=${session} />`) : null;
  }
  const item = NAV.find((n) => n.path === path);
  if (!item) return undefined;
  if (!allowed(session, item)) return null;
  switch (path) {
    case "/services": return page("services", ({ ServicesPage }) => html`<${ServicesPage} session=${session} query=${route.query} />`);
    case "/create": return page("create", ({ CreatePage }) => html`<${CreatePage} session=${session} query=${route.query} />`);
    case "/templates": return page("templates", ({ TemplatesPage }) => html`<${TemplatesPage} session=${session} />`);
    case "/customers": return page("customers", ({ CustomersPage }) => html`<${CustomersPage} session=${session} />`);
    case "/keys": return page("keys", ({ KeysPage }) => html`<${KeysPage} session=${session} />`);
    case "/deploy-keys": return page("deploy-keys", ({ DeployKeysPage }) => html`<${DeployKeysPage} session=${session} />`);
  }
  return undefined;
}

/** The page a path shows once signed in (the start page, services, for "/" and the sign-in). */
function pageNameOf(path) {
  if (/^\/services\/[^/]+\/?$/.test(path)) return "service";
  const name = path.replace(/^\/+|\/+$/g, "");
  return PAGES[name] && name !== "signin" ? name : "services";
}

function homeFor(session) {
  const first = NAV.find((n) => allowed(session, n));
  return first ? first.path : "/services";
}

/** After signing in: to ``next`` (a route, or a page of the server such as the docs). */
function go(next, session) {
  const to = next === "/" ? homeFor(session) : next;
  if (SERVER_PAGES.includes(to)) location.assign(to);
  else navigate(to, { replace: true });
}

function Shell({ session, onSignOut }) {
  const route = useRoute();
  const main = useRef(null);
  const lastPath = useRef(route.path);

  useEffect(() => {
    if (route.path === "/" || route.path === "/sign-in") {
      go(route.path === "/sign-in" ? safeNext(route.query.get("next")) : "/", session);
    }
  }, [route.path]);

  useEffect(() => {
    if (lastPath.current !== route.path) {
      lastPath.current = route.path;
      clearError();
      if (main.current) main.current.focus({ preventScroll: true });
      window.scrollTo(0, 0);
    }
  }, [route.path]);

  const shown = route.path === "/" || route.path === "/sign-in" ? html`<${Loading} />` : pageFor(route, session);
  const who = session.key ? `key ${session.key.name}` : session.email || "signed in";
  return html`
    <a class="skip" href="#main">Skip to content</a>
    <header class="topbar">
      <a class="brand" href=${homeFor(session)}><img class="logo" src="/assets/slipway.svg" alt="" width="24" height="24" /> Slipway</a>
      <nav class="mainnav" aria-label="Main">
        ${NAV.filter((n) => allowed(session, n)).map((n) => html`
          <a href=${n.path} data-testid=${n.testid}
             aria-current=${route.path === n.path || (n.path === "/services" && route.path.startsWith("/services/")) ? "page" : undefined}>${n.label}</a>`)}
        <a href="/api/docs" class="nav-docs" data-testid="nav-docs" title="The panel API's interactive documentation">API docs</a>
      </nav>
      <div class="who">
        <span class="who-name" title=${who}>${who}</span>
        <span class="badge role">${session.role}</span>
        <button type="button" class="ghost small" data-testid="sign-out" onClick=${onSignOut}>Sign out</button>
      </div>
    </header>
    <main id="main" tabindex="-1" ref=${main}>
      ${shown === undefined ? html`<section><h1>Not found</h1><p>There is no page at this address. <a href=${homeFor(session)}>Go to the start page</a>.</p></section>`
        : shown === null ? html`<section><h1>Not allowed</h1><p>Your key or role does not allow this page.</p></section>`
        : shown}
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

/** Only a path on this panel may be a sign-in's destination: a route, or a server page. */
function safeNext(next) {
  if (SERVER_PAGES.includes(next)) return next;
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
    return html`${page("signin", ({ SignIn }) => html`<${SignIn} oidc=${OIDC} next=${safeNext(route.query.get("next"))}
      onSignedIn=${async () => { setHint(true); await loadSession(); }} />`)}
      <${ErrorToast} />`;
  }
  return html`<${Shell} session=${session} onSignOut=${signOut} />`;
}

// Start fetching the code of the page this load shows while the session is asked for.
loadPage(hasHint() ? pageNameOf(location.pathname) : "signin").catch(() => { /* Lazy shows it */ });

const root = document.getElementById("app");
root.replaceChildren(); // index.html's message for a failed load (boot.js)
try { sessionStorage.removeItem("slipway.load-attempts"); } catch (e) { /* private mode */ }
interceptLinks(root);
render(html`<${App} />`, root);
