// The services list: the list endpoint's own search, filters, sort and pages (kept in the
// address), live status and deploy progress from /api/ws applied to the rows in place.
import { useEffect, useRef, useState } from "../vendor/hooks.mjs";
import { api, on, selectServices } from "../api.js";
import { navigate } from "../router.js";
import { Empty, Loading, Pager, StatusBadge, can, fmtDate, fmtResources, html, safeUrl, showError, useDebounced } from "../ui.js";

const PER_PAGE = 20;
const STATUSES = ["running", "deploying", "stopped", "failed"];
const SORTS = [
  ["created_at:desc", "Newest first"],
  ["created_at:asc", "Oldest first"],
  ["name:asc", "Name A–Z"],
  ["name:desc", "Name Z–A"],
  ["updated_at:desc", "Recently changed"],
  ["status:asc", "Status"],
];
const DEFAULT_SORT = SORTS[0][0];

function readFilters(query) {
  return {
    search: query.get("search") || "",
    status: query.get("status") || "",
    customer_id: query.get("customer_id") || "",
    sort: query.get("sort") || DEFAULT_SORT,
    page: Math.max(1, parseInt(query.get("page"), 10) || 1),
  };
}

function writeFilters(f) {
  const q = new URLSearchParams();
  if (f.search) q.set("search", f.search);
  if (f.status) q.set("status", f.status);
  if (f.customer_id) q.set("customer_id", f.customer_id);
  if (f.sort && f.sort !== DEFAULT_SORT) q.set("sort", f.sort);
  if (f.page > 1) q.set("page", String(f.page));
  const s = q.toString();
  navigate("/services" + (s ? "?" + s : ""), { replace: true });
}

/** Customers for the filter and the rows' names (first 100 by name), when the key may read them. */
export function useCustomers(session) {
  const [customers, setCustomers] = useState([]);
  const allowed = can(session, "customers:read") && !session.customer_id;
  useEffect(() => {
    if (!allowed) return;
    let live = true;
    api("/api/customers", { query: { per_page: 100, sort: "name" } })
      .then((r) => { if (live) setCustomers(r.data); })
      .catch(showError);
    return () => { live = false; };
  }, [allowed]);
  return customers;
}

export function ServicesPage({ session, query }) {
  const filters = readFilters(query);
  const [searchText, setSearchText] = useState(filters.search);
  const search = useDebounced(searchText, 300);
  const [list, setList] = useState(null);
  const [progress, setProgress] = useState({});
  const [reload, setReload] = useState(0);
  const customers = useCustomers(session);
  const customerNames = Object.fromEntries(customers.map((c) => [c.id, c.name]));
  const listRef = useRef(null);
  listRef.current = list;

  useEffect(() => { document.title = "Services · Slipway"; }, []);

  useEffect(() => {
    if (search !== filters.search) writeFilters({ ...filters, search, page: 1 });
  }, [search]);
  // the address changed by other means (the menu's link, back): the box follows it
  useEffect(() => { if (filters.search !== search) setSearchText(filters.search); }, [filters.search]);

  const key = [filters.search, filters.status, filters.customer_id, filters.sort, filters.page].join("|");
  useEffect(() => {
    let live = true;
    const [sort, order] = filters.sort.split(":");
    api("/api/services", {
      query: { page: filters.page, per_page: PER_PAGE, search: filters.search, status: filters.status,
               customer_id: filters.customer_id, sort, order },
    }).then((r) => {
      if (!live) return;
      setList(r);
      selectServices(r.data.map((s) => s.id));
    }).catch((e) => { if (live) { showError(e); setList({ data: [], total: 0, page: 1, per_page: PER_PAGE }); } });
    return () => { live = false; };
  }, [key, reload]);

  useEffect(() => {
    const offs = [
      on("service.status", (d) => {
        const current = listRef.current;
        if (!current || !current.data.some((s) => s.id === d.id)) return;
        setList({
          ...current,
          data: d.status === "deleted" ? current.data.filter((s) => s.id !== d.id)
            : current.data.map((s) => (s.id === d.id ? { ...s, status: d.status } : s)),
          total: d.status === "deleted" ? current.total - 1 : current.total,
        });
        if (d.status !== "deploying") setProgress((p) => { const n = { ...p }; delete n[d.id]; return n; });
      }),
      on("deploy.progress", (d) => {
        setProgress((p) => ({ ...p, [d.service_id]: d }));
      }),
      on("connection", (c) => { if (c.reconnected) setReload((n) => n + 1); }),
    ];
    return () => { offs.forEach((off) => off()); selectServices([]); };
  }, []);

  const set = (change) => writeFilters({ ...filters, ...change, page: change.page || 1 });
  const showCustomer = !session.customer_id;

  return html`<section>
    <div class="page-head">
      <h1>Services</h1>
      ${can(session, "services:create", "services:deploy") ? html`<a class="button primary" href="/create">New service</a>` : null}
    </div>
    <form class="filters" role="search" onSubmit=${(e) => e.preventDefault()}>
      <div class="field">
        <label for="f-search">Search</label>
        <input id="f-search" type="search" data-testid="search" placeholder="Name contains…" value=${searchText}
          onInput=${(e) => setSearchText(e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="f-status">Status</label>
        <select id="f-status" data-testid="filter-status" value=${filters.status} onChange=${(e) => set({ status: e.currentTarget.value })}>
          <option value="">Any status</option>
          ${STATUSES.map((s) => html`<option value=${s}>${s}</option>`)}
        </select>
      </div>
      ${showCustomer && customers.length ? html`<div class="field">
        <label for="f-customer">Customer</label>
        <select id="f-customer" data-testid="filter-customer" value=${filters.customer_id} onChange=${(e) => set({ customer_id: e.currentTarget.value })}>
          <option value="">All customers</option>
          ${customers.map((c) => html`<option value=${c.id}>${c.name}</option>`)}
        </select>
      </div>` : null}
      <div class="field">
        <label for="f-sort">Sort</label>
        <select id="f-sort" data-testid="sort" value=${filters.sort} onChange=${(e) => set({ sort: e.currentTarget.value })}>
          ${SORTS.map(([v, label]) => html`<option value=${v}>${label}</option>`)}
        </select>
      </div>
    </form>
    ${list === null ? html`<${Loading} />` : list.data.length === 0
      ? html`<${Empty}>${filters.search || filters.status || filters.customer_id ? "No service matches these filters." : "No services yet."}</${Empty}>`
      : html`<ul class="rows services" aria-label="Services">
          ${list.data.map((s) => html`<${ServiceRow} key=${s.id} service=${s} progress=${progress[s.id]}
              customer=${showCustomer ? customerNames[s.customer_id] || s.customer_id : null} />`)}
        </ul>`}
    ${list && list.total > PER_PAGE ? html`<${Pager} page=${filters.page} perPage=${PER_PAGE} total=${list.total}
        onPage=${(page) => writeFilters({ ...filters, page })} />` : null}
  </section>`;
}

/** The whole row opens the service (its name stays the link for keyboards and new tabs);
 * a click on a link inside it, or a text selection, does what it does. */
function openRow(e, id) {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  if (e.target.closest && e.target.closest("a, button, input, select, textarea")) return;
  if (String(window.getSelection ? window.getSelection() : "")) return;
  navigate("/services/" + encodeURIComponent(id));
}

function ServiceRow({ service: s, progress, customer }) {
  return html`<li class="row clickable" data-testid="service-row" onClick=${(e) => openRow(e, s.id)}>
    <div class="row-main">
      <a class="row-title" href=${"/services/" + encodeURIComponent(s.id)}>${s.name}</a>
      <${StatusBadge} status=${s.status} />
    </div>
    <div class="row-meta">
      ${customer ? html`<span title="Customer">${customer}</span>` : null}
      <span title="Deploy method">${s.deploy_method}${s.template ? ` · ${s.template}` : ""}</span>
      <span class="resources" title="CPU and memory">${fmtResources(s.resources)}</span>
      <span title="Last change">${fmtDate(s.updated_at)}</span>
    </div>
    ${safeUrl(s.url) && s.status === "running" ? html`<a class="row-url" href=${s.url} target="_blank" rel="noopener noreferrer">${s.url}</a>`
      : s.url ? html`<span class="row-url muted" title="Not served while the service is not running">${s.url}</span>` : null}
    ${s.status === "deploying" && progress ? html`<div class="row-progress">
      <progress max="100" value=${progress.progress} aria-label=${"Deploy progress of " + s.name}></progress>
      <small>${progress.message || progress.step}</small></div>` : null}
  </li>`;
}
