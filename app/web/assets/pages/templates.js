// The template catalog by category, each template with its variables.
import { useEffect, useState } from "../vendor/hooks.mjs";
import { api } from "../api.js";
import { Empty, Loading, can, html, showError } from "../ui.js";

// the catalog's categories are ids (`cms`, `database`): shown as words, acronyms in capitals
const CATEGORY_WORDS = { cms: "CMS", crm: "CRM", ci: "CI", ai: "AI", api: "API", db: "DB", vpn: "VPN", dns: "DNS", sql: "SQL" };

/** A category's label: "cms" → "CMS", "database" → "Database", "dev-tools" → "Dev tools". */
export function categoryLabel(category) {
  const words = String(category || "").trim().split(/[\s_-]+/).filter(Boolean);
  if (!words.length) return "Other";
  return words.map((w, i) => {
    const known = CATEGORY_WORDS[w.toLowerCase()];
    if (known) return known;
    if (w !== w.toLowerCase()) return w; // already written with capitals ("MySQL")
    return i === 0 ? w.charAt(0).toUpperCase() + w.slice(1) : w;
  }).join(" ");
}

export function groupByCategory(templates) {
  const groups = new Map();
  for (const t of templates) {
    const c = t.category || "Other";
    if (!groups.has(c)) groups.set(c, []);
    groups.get(c).push(t);
  }
  return [...groups.entries()].sort((a, b) => categoryLabel(a[0]).localeCompare(categoryLabel(b[0])));
}

export function TemplateCard({ template: t, selected, action }) {
  return html`<article class=${"card template" + (selected ? " selected" : "")} data-testid="template-card">
    <h4>${t.name}</h4>
    <p class="muted small">${t.description}</p>
    ${t.variables.length ? html`<dl class="vars-list">
      ${t.variables.map((v) => html`<dt class="mono">${v.name}${v.required ? html`<span class="req" title="required"> *</span>` : null}</dt>
        <dd>${v.description}${v.default !== null && v.default !== undefined ? html` <span class="muted">(default ${v.default})</span>` : null}</dd>`)}
    </dl>` : html`<p class="muted small">No variables.</p>`}
    ${action ? html`<div class="card-actions">${action}</div>` : null}
  </article>`;
}

export function TemplatesPage({ session }) {
  const [templates, setTemplates] = useState(null);
  const [category, setCategory] = useState("");

  useEffect(() => {
    document.title = "Templates · Slipway";
    api("/api/templates", { query: { per_page: 100 } }).then((r) => setTemplates(r.data))
      .catch((e) => { showError(e); setTemplates([]); });
  }, []);

  if (templates === null) return html`<${Loading} />`;
  const groups = groupByCategory(templates);
  const deploy = can(session, "services:create", "services:deploy");
  const shown = category ? groups.filter(([c]) => c === category) : groups;
  return html`<section>
    <div class="page-head">
      <h1>Templates</h1>
      ${groups.length > 1 ? html`<div class="field inline-field">
        <label for="f-category">Category</label>
        <select id="f-category" value=${category} onChange=${(e) => setCategory(e.currentTarget.value)}>
          <option value="">All</option>
          ${groups.map(([c]) => html`<option value=${c}>${categoryLabel(c)}</option>`)}
        </select>
      </div>` : null}
    </div>
    ${templates.length === 0 ? html`<${Empty}>The catalog is empty.</${Empty}>` : shown.map(([c, list]) => html`<section class="category">
      <h2 data-testid="template-category">${categoryLabel(c)}</h2>
      <div class="cards">
        ${list.map((t) => html`<${TemplateCard} key=${t.id} template=${t}
          action=${deploy ? html`<a class="button small" href=${"/create?template=" + encodeURIComponent(t.id)}>Deploy ${t.name}</a>` : null} />`)}
      </div>
    </section>`)}
  </section>`;
}
