// A small JSON-Schema → form renderer for the create form: each deploy method's fields
// come from its request schema in the served contract (/api/openapi.json), so a deploy
// plugin the frontend has never heard of still gets a form. Handles string (textarea for
// long text such as compose), enum, integer/number, boolean, object of strings (key and
// value rows, e.g. variables) and arrays (of enum: checkboxes; else one item a line).
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

/** The deploy methods of the served contract and, per method, its ordered fields. */
export function deployMethods(doc) {
  const schemas = (doc.components && doc.components.schemas) || {};
  const create = schemas.ServiceCreate || { properties: {}, required: [] };
  const baseProps = create.properties || {};
  const baseRequired = (create.required || []).filter((f) => f !== "deploy_method");
  const methods = (deref(doc, schemas.DeployMethod).enum || []).slice();
  const result = {};
  for (const name of methods) {
    const rule = (create.allOf || []).find((r) => r.if && r.if.properties && r.if.properties.deploy_method
      && r.if.properties.deploy_method.const === name);
    const then = deref(doc, rule ? rule.then : {});
    const props = then.properties || {};
    const required = new Set([...baseRequired, ...(then.required || [])]);
    const names = [...baseRequired, ...Object.keys(props).filter((f) => !baseRequired.includes(f))];
    result[name] = names.map((field) => ({
      name: field,
      // the method's own constraints over the shared property's description
      schema: { ...deref(doc, baseProps[field]), ...deref(doc, props[field]) },
      required: required.has(field),
    }));
  }
  return result;
}

/** The method among `methods` (deployMethods' answer) whose request has `field`, or undefined. */
export function methodTaking(methods, field) {
  return Object.keys(methods || {}).find((name) => methods[name].some((f) => f.name === field));
}

export function labelFor(name) {
  const words = name.replace(/_id$/, "").replace(/_/g, " ");
  const special = { url: "URL", git: "Git", ai: "AI" };
  const text = words.split(" ").map((w) => special[w] || w).join(" ");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

export function isMultiline(field) {
  const s = field.schema;
  return field.name === "compose" || s.format === "textarea" || s.contentMediaType === "application/yaml"
    || s["x-slipway-multiline"] === true;
}

/** The initial value of a field for its widget. */
export function emptyValue(field) {
  const s = field.schema;
  if (s.type === "object") return [{ key: "", value: "" }];
  if (s.type === "array") return (s.items && s.items.enum) ? [] : "";
  if (s.type === "boolean") return s.default === true;
  return s.default !== undefined && s.default !== null ? String(s.default) : "";
}

/** The request body's value of a field, or undefined to leave it out. */
export function bodyValue(field, value) {
  const s = field.schema;
  if (s.type === "object") {
    const out = {};
    for (const row of value || []) if (row.key.trim()) out[row.key.trim()] = row.value;
    return Object.keys(out).length ? out : undefined;
  }
  if (s.type === "array") {
    if (Array.isArray(value)) return value.length ? value : undefined;
    const items = String(value || "").split("\n").map((v) => v.trim()).filter(Boolean);
    return items.length ? items : undefined;
  }
  if (s.type === "boolean") return !!value;
  if (value === "" || value === undefined || value === null) return undefined;
  if (s.type === "integer") { const n = Number(value); return Number.isInteger(n) ? n : value; }
  if (s.type === "number") { const n = Number(value); return isFinite(n) ? n : value; }
  return value;
}

/** One field's control, labelled, with its 422 error (data-testid field-error-NAME). */
export function SchemaField({ field, value, onChange, errors }) {
  const { name, schema: s, required } = field;
  const id = "f-" + name;
  const error = errors[name];
  const label = html`${labelFor(name)}${required ? html`<span class="req" aria-hidden="true"> *</span>` : null}`;
  const common = {
    id, name, "data-testid": "field-" + name,
    "aria-required": required ? "true" : undefined,
    "aria-invalid": error ? "true" : undefined,
    "aria-describedby": error ? "e-" + name : s.description ? "h-" + name : undefined,
  };
  const hint = s.description;

  if (s.type === "object") {
    const rows = value || [];
    const set = (i, part, v) => onChange(rows.map((r, j) => (j === i ? { ...r, [part]: v } : r)));
    return html`<${Field} label=${label} name=${name} error=${error} hint=${hint || "Names and values (text)."} wide>
      <div class="kv" id=${id} data-testid=${"field-" + name} role="group" aria-label=${labelFor(name)}>
        ${rows.map((r, i) => html`<div class="kv-row">
          <input aria-label=${`${labelFor(name)} name ${i + 1}`} placeholder="NAME" value=${r.key} spellcheck="false"
            class="mono" onInput=${(e) => set(i, "key", e.currentTarget.value)} />
          <input aria-label=${`${labelFor(name)} value ${i + 1}`} placeholder="value" value=${r.value}
            onInput=${(e) => set(i, "value", e.currentTarget.value)} />
          <button type="button" class="ghost small" aria-label=${`Remove ${labelFor(name).toLowerCase()} ${i + 1}`}
            onClick=${() => onChange(rows.filter((_, j) => j !== i))}>✕</button>
        </div>`)}
        <button type="button" class="ghost small" onClick=${() => onChange([...rows, { key: "", value: "" }])}>+ Add</button>
        ${Object.keys(errors).filter((k) => k.startsWith(name + ".")).map((k) => html`
          <small class="field-error" data-testid=${"field-error-" + k}>${k.slice(name.length + 1)}: ${errors[k]}</small>`)}
      </div>
    </${Field}>`;
  }
  if (s.type === "array" && s.items && deref({}, s.items).enum) {
    const chosen = new Set(value || []);
    return html`<${Field} label=${label} name=${name} error=${error} hint=${hint} wide>
      <div class="checks" id=${id} data-testid=${"field-" + name} role="group" aria-label=${labelFor(name)}>
        ${s.items.enum.map((opt) => html`<label class="check"><input type="checkbox" checked=${chosen.has(opt)}
          onChange=${(e) => { const next = new Set(chosen); e.currentTarget.checked ? next.add(opt) : next.delete(opt); onChange([...next]); }} /> ${opt}</label>`)}
      </div>
    </${Field}>`;
  }
  if (s.type === "array") {
    return html`<${Field} label=${label} name=${name} error=${error} hint=${hint || "One a line."} wide>
      <textarea ...${common} rows="3" value=${value} onInput=${(e) => onChange(e.currentTarget.value)}></textarea>
    </${Field}>`;
  }
  if (s.type === "boolean") {
    return html`<div class=${"field check" + (error ? " invalid" : "")}>
      <label class="check"><input type="checkbox" ...${common} checked=${!!value} onChange=${(e) => onChange(e.currentTarget.checked)} /> ${label}</label>
      ${error ? html`<small class="field-error" id=${"e-" + name} data-testid=${"field-error-" + name}>${error}</small>` : null}
    </div>`;
  }
  if (Array.isArray(s.enum)) {
    return html`<${Field} label=${label} name=${name} error=${error} hint=${hint}>
      <select ...${common} value=${value} onChange=${(e) => onChange(e.currentTarget.value)}>
        ${required ? null : html`<option value="">—</option>`}
        ${s.enum.map((opt) => html`<option value=${opt}>${opt}</option>`)}
      </select>
    </${Field}>`;
  }
  if (s.type === "integer" || s.type === "number") {
    return html`<${Field} label=${label} name=${name} error=${error} hint=${hint}>
      <input type="number" ...${common} step=${s.type === "integer" ? "1" : "any"} min=${s.minimum} max=${s.maximum}
        value=${value} onInput=${(e) => onChange(e.currentTarget.value)} />
    </${Field}>`;
  }
  if (isMultiline(field)) {
    return html`<${Field} label=${label} name=${name} error=${error} hint=${hint} wide>
      <textarea ...${common} class="code-input" rows="14" spellcheck="false" autocapitalize="off" autocomplete="off"
        value=${value} onInput=${(e) => onChange(e.currentTarget.value)}></textarea>
    </${Field}>`;
  }
  return html`<${Field} label=${label} name=${name} error=${error} hint=${hint}>
    <input type=${s.format === "uri" ? "url" : "text"} ...${common} spellcheck="false" autocapitalize="off"
      minlength=${s.minLength} maxlength=${s.maxLength} value=${value} onInput=${(e) => onChange(e.currentTarget.value)} />
  </${Field}>`;
}
