// A small JSON-Schema → form renderer for the create form and a service's settings: each
// deploy method's fields come from its request schema in the served contract
// (/api/openapi.json), and what it keeps per service and whether it deploys on push or has
// previews from DeployMethod's x-slipway-capabilities, so a deploy plugin the frontend has
// never heard of still gets its form and its settings. A field's label is its schema's
// title, its help the description. Handles string (a textarea for YAML such as compose),
// enum, integer/number, boolean, object of strings (key and value rows, e.g. variables)
// and arrays (of enum: checkboxes; else a list of text inputs).
import { Field, html } from "./ui.js";

/** Resolve a local "#/components/..." $ref (one level is all the contract uses). */
export function deref(doc, schema) {
  let s = schema || {};
  for (let i = 0; s.$ref && i < 10; i++) {
    const path = s.$ref.replace(/^#\//, "").split("/");
    s = path.reduce((node, part) => (node ? node[part] : undefined), doc) || {};
  }
  if (Array.isArray(s.allOf) && !s.properties && !s.type) {
    return s.allOf.reduce((acc, part) => ({ ...acc, ...deref(doc, part) }), {});
  }
  return s;
}

/** A schema's type, the first that is not "null" (["string", "null"] is a string). */
const typeOf = (s) => (Array.isArray(s.type) ? s.type.find((t) => t !== "null") : s.type);

/** The deploy methods of the served contract, by name: {title, description, fields (ordered:
 * the create's required ones, then the method's own), kept (the names of the fields it keeps
 * per service), deploysOnPush, previews, patchable (the fields a PATCH takes)}. */
export function deployMethods(doc) {
  const schemas = (doc.components && doc.components.schemas) || {};
  const create = schemas.ServiceCreate || { properties: {}, required: [] };
  const baseProps = create.properties || {};
  const baseRequired = (create.required || []).filter((f) => f !== "deploy_method");
  const method = deref(doc, schemas.DeployMethod);
  const caps = method["x-slipway-capabilities"] || {};
  const patch = deref(doc, schemas.ServicePatch);
  const result = {};
  for (const name of method.enum || []) {
    const rule = (create.allOf || []).find((r) => r.if && r.if.properties && r.if.properties.deploy_method
      && r.if.properties.deploy_method.const === name);
    const then = deref(doc, rule ? rule.then : {});
    const props = then.properties || {};
    const required = new Set([...baseRequired, ...(then.required || [])]);
    const names = [...baseRequired, ...Object.keys(props).filter((f) => !baseRequired.includes(f))];
    const cap = caps[name] || {};
    result[name] = {
      title: then.title || labelFor(name),
      description: then.description || `The ${name} deploy method`,
      fields: names.map((field) => ({
        name: field,
        // the method's own constraints over the shared property's description
        schema: { ...deref(doc, baseProps[field]), ...deref(doc, props[field]) },
        required: required.has(field),
      })),
      kept: cap.source_fields || [],
      deploysOnPush: !!cap.deploys_on_push,
      previews: !!cap.previews,
      patchable: (f) => patch.additionalProperties !== false || !!(patch.properties || {})[f.name],
    };
  }
  return result;
}

/** The method among `methods` (deployMethods' answer) whose request has `field`, or undefined. */
export function methodTaking(methods, field) {
  return Object.keys(methods || {}).find((name) => methods[name].some((f) => f.name === field));
}

export function labelFor(name) {
  const words = name.replace(/_id$/, "").replace(/_/g, " ");
  const special = { url: "URL" };
  const text = words.split(" ").map((w) => special[w] || w).join(" ");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** A field's label: its schema's title, else its name in words. */
export const titleOf = (field) => field.schema.title || labelFor(field.name);

export function isMultiline(field) {
  const s = field.schema;
  return s.format === "textarea" || s.contentMediaType === "application/yaml" || s["x-slipway-multiline"] === true;
}

/** The value of a field for its widget: ``value`` as a request or a detail has it, or the
 * field's default when ``value`` is undefined or null. */
export function widgetValue(field, value) {
  const s = field.schema;
  const type = typeOf(s);
  const v = value === undefined || value === null ? s.default : value;
  if (type === "object") {
    const rows = Object.entries(v || {}).map(([key, val]) => ({ key, value: String(val) }));
    return rows.length ? rows : [{ key: "", value: "" }];
  }
  if (type === "array") return Array.isArray(v) ? v.map(String) : [];
  if (type === "boolean") return v === true;
  return v !== undefined && v !== null ? String(v) : "";
}

/** The initial value of a field for its widget. */
export const emptyValue = (field) => widgetValue(field, undefined);

/** The request body's value of a field, or undefined to leave it out. */
export function bodyValue(field, value) {
  const type = typeOf(field.schema);
  if (type === "object") {
    const out = {};
    for (const row of value || []) if (row.key.trim()) out[row.key.trim()] = row.value;
    return Object.keys(out).length ? out : undefined;
  }
  if (type === "array") {
    const items = (value || []).map((v) => (field.schema.items && field.schema.items.enum ? v : v.trim())).filter(Boolean);
    return items.length ? items : undefined;
  }
  if (type === "boolean") return !!value;
  if (value === "" || value === undefined || value === null) return undefined;
  if (type === "integer") { const n = Number(value); return Number.isInteger(n) ? n : value; }
  if (type === "number") { const n = Number(value); return isFinite(n) ? n : value; }
  return value;
}

function matches(pattern, value) {
  try { return new RegExp(pattern, "u").test(value); } catch (e) { return true; } // the server decides
}

/** One field's control, labelled (``suffix`` after the label), with its 422 error
 * (data-testid field-error-NAME); ``readOnly``: shown, not changed. */
export function SchemaField({ field, value, onChange, errors, suffix, readOnly }) {
  const { name, schema: s, required } = field;
  const type = typeOf(s);
  const id = "f-" + name;
  // the server's word, else a text that does not match the schema's pattern (said before a request)
  const error = errors[name] || (s.pattern && typeof value === "string" && value && !matches(s.pattern, value)
    ? `must match ${s.pattern}` : undefined);
  const title = titleOf(field);
  const label = html`${title}${required && !readOnly ? html`<span class="req" aria-hidden="true"> *</span>` : null}${suffix}`;
  const common = {
    id, name, "data-testid": "field-" + name, readOnly,
    "aria-required": required ? "true" : undefined,
    "aria-invalid": error ? "true" : undefined,
    "aria-describedby": error ? "e-" + name : s.description ? "h-" + name : undefined,
  };
  const hint = s.description;
  const rows = (items, draw, blank) => html`
    ${items.map((r, i) => html`<div class=${"kv-row" + (blank === "" ? " one" : "")}>${draw(r, i)}
      ${readOnly ? null : html`<button type="button" class="ghost small" aria-label=${`Remove ${title.toLowerCase()} ${i + 1}`}
        onClick=${() => onChange(items.filter((_, j) => j !== i))}>✕</button>`}</div>`)}
    ${readOnly ? null : html`<button type="button" class="ghost small" onClick=${() => onChange([...items, blank])}>+ Add</button>`}
    ${Object.keys(errors).filter((k) => k.startsWith(name + ".")).map((k) => html`
      <small class="field-error" data-testid=${"field-error-" + k}>${k.slice(name.length + 1)}: ${errors[k]}</small>`)}`;

  if (type === "object") {
    const set = (i, part, v) => onChange(value.map((r, j) => (j === i ? { ...r, [part]: v } : r)));
    return html`<${Field} label=${label} name=${name} error=${error} hint=${hint || "Names and values (text)."} wide>
      <div class="kv" id=${id} data-testid=${"field-" + name} role="group" aria-label=${title}>
        ${rows(value || [], (r, i) => html`
          <input aria-label=${`${title} name ${i + 1}`} placeholder="NAME" value=${r.key} spellcheck="false" readOnly=${readOnly}
            class="mono" onInput=${(e) => set(i, "key", e.currentTarget.value)} />
          <input aria-label=${`${title} value ${i + 1}`} placeholder="value" value=${r.value} readOnly=${readOnly}
            onInput=${(e) => set(i, "value", e.currentTarget.value)} />`, { key: "", value: "" })}
      </div>
    </${Field}>`;
  }
  const items = type === "array" ? deref({}, s.items) : null;
  if (items && items.enum) {
    const chosen = new Set(value || []);
    return html`<${Field} label=${label} name=${name} error=${error} hint=${hint} wide>
      <div class="checks" id=${id} data-testid=${"field-" + name} role="group" aria-label=${title}>
        ${items.enum.map((opt) => html`<label class="check"><input type="checkbox" checked=${chosen.has(opt)} disabled=${readOnly}
          onChange=${(e) => { const next = new Set(chosen); e.currentTarget.checked ? next.add(opt) : next.delete(opt); onChange([...next]); }} /> ${opt}</label>`)}
      </div>
    </${Field}>`;
  }
  if (items) {
    const list = value || [];
    return html`<${Field} label=${label} name=${name} error=${error} hint=${hint} wide>
      <div class="kv" id=${id} data-testid=${"field-" + name} role="group" aria-label=${title}>
        ${rows(list, (v, i) => html`<input aria-label=${`${title} ${i + 1}`} value=${v} spellcheck="false" readOnly=${readOnly}
          maxlength=${items.maxLength} onInput=${(e) => onChange(list.map((x, j) => (j === i ? e.currentTarget.value : x)))} />`, "")}
      </div>
    </${Field}>`;
  }
  if (type === "boolean") {
    return html`<div class=${"field check" + (error ? " invalid" : "")}>
      <label class="check"><input type="checkbox" ...${common} disabled=${readOnly} checked=${!!value} onChange=${(e) => onChange(e.currentTarget.checked)} /> ${label}</label>
      ${hint && !error ? html`<small class="hint" id=${"h-" + name}>${hint}</small>` : null}
      ${error ? html`<small class="field-error" id=${"e-" + name} data-testid=${"field-error-" + name}>${error}</small>` : null}
    </div>`;
  }
  if (Array.isArray(s.enum)) {
    return html`<${Field} label=${label} name=${name} error=${error} hint=${hint}>
      <select ...${common} disabled=${readOnly} value=${value} onChange=${(e) => onChange(e.currentTarget.value)}>
        ${required ? null : html`<option value="">—</option>`}
        ${s.enum.map((opt) => html`<option value=${opt}>${opt}</option>`)}
      </select>
    </${Field}>`;
  }
  if (type === "integer" || type === "number") {
    return html`<${Field} label=${label} name=${name} error=${error} hint=${hint}>
      <input type="number" ...${common} step=${type === "integer" ? "1" : "any"} min=${s.minimum} max=${s.maximum}
        value=${value} onInput=${(e) => onChange(e.currentTarget.value)} />
    </${Field}>`;
  }
  const text = { ...common, spellcheck: "false", autocapitalize: "off", minlength: s.minLength, maxlength: s.maxLength,
    value, onInput: (e) => onChange(e.currentTarget.value) };
  if (isMultiline(field)) {
    return html`<${Field} label=${label} name=${name} error=${error} hint=${hint} wide>
      <textarea ...${text} class="code-input" rows="14" autocomplete="off"></textarea>
    </${Field}>`;
  }
  return html`<${Field} label=${label} name=${name} error=${error} hint=${hint}>
    <input type=${{ uri: "url", email: "email" }[s.format] || "text"} ...${text} />
  </${Field}>`;
}
