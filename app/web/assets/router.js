// Client-side routes on the History API: the server answers index.html for every
// non-API path, so /services/svc_x can be reloaded or bookmarked.
import { useEffect, useState } from "./vendor/hooks.mjs";

const listeners = new Set();

function current() {
  return { path: location.pathname.replace(/\/+$/, "") || "/", query: new URLSearchParams(location.search) };
}

/** Go to a path of this page ("/services?page=2"); replace: no new history entry. */
export function navigate(to, { replace = false } = {}) {
  if (to === location.pathname + location.search) return;
  history[replace ? "replaceState" : "pushState"](null, "", to);
  for (const fn of [...listeners]) fn(current());
}

addEventListener("popstate", () => { for (const fn of [...listeners]) fn(current()); });

/** The current route, re-rendering its user on every navigation. */
export function useRoute() {
  const [route, setRoute] = useState(current);
  useEffect(() => {
    listeners.add(setRoute);
    // a navigation between the first render and this effect would be missed otherwise
    const now = current();
    setRoute((old) => (old.path === now.path && old.query.toString() === now.query.toString() ? old : now));
    return () => listeners.delete(setRoute);
  }, []);
  return route;
}

/** Follow same-page links without reloading (plain clicks only; new tabs still work). */
export function interceptLinks(root) {
  root.addEventListener("click", (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = e.target.closest && e.target.closest("a[href]");
    if (!a || a.target || a.hasAttribute("download") || a.dataset.external !== undefined) return;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin || url.pathname.startsWith("/api/")) return;
    e.preventDefault();
    navigate(url.pathname + url.search);
  });
}
