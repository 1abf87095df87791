// Create a service: one form per loaded deploy method, its title, description and fields
// generated from the method's request schema in the served contract (a method installed
// with pip gets its form with no change here); the template gallery for template_id, the
// customer's deploy keys for deploy_key_id; the 422's error.fields shown beside their fields.
import { useEffect, useState } from "../vendor/hooks.mjs";
import { api, contract } from "../api.js";
import { navigate } from "../router.js";
import { Field, Loading, can, clearError, html, showError } from "../ui.js";
import { SchemaField, bodyValue, deployMethods, emptyValue } from "../schemaform.js";
import { useCustomers } from "./services.js";
import { TemplateCard, categoryLabel, groupByCategory } from "./templates.js";
import { useDeployKeys } from "../pickers.js";
import { DeployKeySelect } from "./git.js";

/** The first method (by name) whose fields include ``field``, or undefined. */
const taking = (methods, field) => Object.keys(methods).find((m) => methods[m].fields.some((f) => f.name === field));

/** The method the form opens with: one of the template catalog when the key may read it
 * (where a first service usually comes from), else one that takes a compose file, else the
 * first. Told by the fields each takes, never by its name. */
function defaultMethod(methods, session) {
  return (can(session, "templates:read") && taking(methods, "template_id")) || taking(methods, "compose")
    || Object.keys(methods)[0] || null;
}

export function CreatePage({ session, query }) {
  const [methods, setMethods] = useState(null);
  const [method, setMethod] = useState(null);
  const [values, setValues] = useState({ customer_id: session.customer_id || "" });
  const [errors, setErrors] = useState({});
  const [busy, setBusy] = useState(false);
  const [templates, setTemplates] = useState(null);
  const customers = useCustomers(session);

  useEffect(() => {
    document.title = "New service · Slipway";
    contract().then((doc) => {
      const found = deployMethods(doc);
      const names = Object.keys(found);
      setMethods(found);
      const wanted = query.get("method") || (query.get("template") ? taking(found, "template_id") : null);
      setMethod(names.includes(wanted) ? wanted : defaultMethod(found, session));
      if (query.get("template")) setValues((v) => ({ ...v, template_id: query.get("template") }));
    }).catch((e) => { showError(e); setMethods({}); });
  }, []);

  const fields = (methods && method && methods[method] && methods[method].fields) || [];
  const wantsTemplates = fields.some((f) => f.name === "template_id") && can(session, "templates:read");
  useEffect(() => {
    if (!wantsTemplates || templates) return;
    api("/api/templates", { query: { per_page: 100 } }).then((r) => setTemplates(r.data)).catch((e) => { showError(e); setTemplates([]); });
  }, [wantsTemplates]);

  useEffect(() => {
    if (customers.length && !values.customer_id) setValues((v) => ({ ...v, customer_id: customers[0].id }));
  }, [customers]);

  const valueOf = (f) => (values[f.name] !== undefined ? values[f.name] : emptyValue(f));
  const setValue = (name, v) => setValues((old) => ({ ...old, [name]: v }));
  const template = templates && values.template_id ? templates.find((t) => t.id === values.template_id) : null;

  async function submit(e) {
    e.preventDefault();
    setBusy(true);
    setErrors({});
    const body = { deploy_method: method };
    for (const f of fields) {
      if (f.name === "variables" && template) {
        const vars = {};
        for (const v of template.variables) {
          const given = (values.template_vars || {})[v.name];
          if (given !== undefined && given !== "") vars[v.name] = given;
        }
        if (Object.keys(vars).length) body.variables = vars;
        continue;
      }
      const v = bodyValue(f, valueOf(f));
      if (v !== undefined) body[f.name] = v;
    }
    try {
      const created = await api("/api/services", { method: "POST", body });
      clearError();
      navigate(`/services/${encodeURIComponent(created.id)}`);
    } catch (err) {
      // a refused field (422) or a taken name (409, error.fields.name) is said next to its
      // field, and only there; anything else (no field to point at) in the toast
      const fields = err.fields && Object.keys(err.fields).length ? err.fields : null;
      setErrors(fields || {});
      if (fields) clearError(); else showError(err);
      setBusy(false);
    }
  }

  if (methods === null) return html`<${Loading} />`;
  const names = Object.keys(methods);
  const shown = new Set(fields.map((f) => f.name));
  const stray = Object.keys(errors).filter((k) => !shown.has(k) && !shown.has(k.split(".")[0]));

  return html`<section>
    <div class="page-head"><h1>New service</h1></div>
    ${names.length === 0 ? html`<p>No deploy method is loaded on this server.</p>` : html`
    <form class="create" onSubmit=${submit} noValidate>
      <fieldset class="methods">
        <legend>Deploy method</legend>
        <div class="method-list">
          ${names.map((m) => html`<button type="button" class=${"method" + (m === method ? " selected" : "")}
              data-testid=${"method-" + m} aria-pressed=${m === method} onClick=${() => { setMethod(m); setErrors({}); }}>
            <strong>${methods[m].title}</strong><small>${methods[m].description}</small>
          </button>`)}
        </div>
      </fieldset>
      <div class="form-grid">
        ${fields.map((f) => {
          if (f.name === "customer_id") return html`<${CustomerField} key="customer_id" field=${f} session=${session}
            customers=${customers} value=${values.customer_id} onChange=${(v) => setValue("customer_id", v)} error=${errors.customer_id} />`;
          if (f.name === "template_id" && templates) return html`<${TemplatePicker} key="template_id" templates=${templates}
            value=${values.template_id} onChange=${(v) => { setValue("template_id", v); setValue("template_vars", {}); }} error=${errors.template_id} />`;
          if (f.name === "deploy_key_id") return html`<${DeployKeyField} key="deploy_key_id" field=${f} session=${session}
            customerId=${values.customer_id} value=${values.deploy_key_id || ""} onChange=${(v) => setValue("deploy_key_id", v)} errors=${errors} />`;
          if (f.name === "variables" && template) return html`<${TemplateVariables} key="template_vars" template=${template}
            values=${values.template_vars || {}} onChange=${(v) => setValue("template_vars", v)} errors=${errors} />`;
          return html`<${SchemaField} key=${f.name} field=${f} value=${valueOf(f)} onChange=${(v) => setValue(f.name, v)} errors=${errors} />`;
        })}
      </div>
      ${stray.length ? html`<ul class="stray-errors">
        ${stray.map((k) => html`<li class="field-error" data-testid=${"field-error-" + k}>${k}: ${errors[k]}</li>`)}
      </ul>` : null}
      <div class="form-actions">
        <button type="submit" class="primary" data-testid="create-service" disabled=${busy || !method}>${busy ? "Creating…" : "Create and deploy"}</button>
        <a href="/services" class="button ghost">Cancel</a>
      </div>
    </form>`}
  </section>`;
}

function CustomerField({ field, session, customers, value, onChange, error }) {
  const props = {
    id: "f-customer_id", name: "customer_id", "data-testid": "field-customer_id", "aria-required": "true",
    "aria-invalid": error ? "true" : undefined, "aria-describedby": error ? "e-customer_id" : undefined,
  };
  let control;
  if (session.customer_id) {
    control = html`<input ...${props} value=${session.customer_id} readOnly />`;
  } else if (customers.length) {
    control = html`<select ...${props} value=${value} onChange=${(e) => onChange(e.currentTarget.value)}>
      ${customers.map((c) => html`<option value=${c.id}>${c.name} (${c.id})</option>`)}
    </select>`;
  } else {
    control = html`<input ...${props} placeholder="cust_…" spellcheck="false" value=${value} onInput=${(e) => onChange(e.currentTarget.value)} />`;
  }
  return html`<${Field} label=${html`Customer<span class="req" aria-hidden="true"> *</span>`} name="customer_id" error=${error} hint=${field.schema.description}>${control}</${Field}>`;
}

/** The deploy key of a git or ai service: a pick of its customer's keys (none: left out). */
function DeployKeyField({ field, session, customerId, value, onChange, errors }) {
  const keys = useDeployKeys(session, customerId);
  useEffect(() => {
    if (keys && value && !keys.some((k) => k.id === value)) onChange(""); // another customer's key
  }, [keys]);
  const error = errors.deploy_key_id;
  return html`<${Field} label="Deploy key" name="deploy_key_id" error=${error}
      hint="For a private repository over ssh: a deploy key of the customer (make one on the Deploy keys page).">
    ${keys === null ? html`<${Loading} />` : html`<${DeployKeySelect} id="f-deploy_key_id" testid="field-deploy_key_id"
      keys=${keys} value=${value} invalid=${!!error} onChange=${onChange} />`}
  </${Field}>`;
}

function TemplatePicker({ templates, value, onChange, error }) {
  const groups = groupByCategory(templates);
  return html`<div class=${"field wide" + (error ? " invalid" : "")}>
    <fieldset class="gallery" id="f-template_id" data-testid="field-template_id">
      <legend>Template<span class="req" aria-hidden="true"> *</span></legend>
      ${templates.length === 0 ? html`<p class="muted">The catalog is empty.</p>` : null}
      ${groups.map(([category, list]) => html`<div class="category">
        <h3 data-testid="template-category">${categoryLabel(category)}</h3>
        <div class="cards">
          ${list.map((t) => html`<${TemplateCard} key=${t.id} template=${t} selected=${t.id === value}
              action=${html`<button type="button" class=${t.id === value ? "primary small" : "small"} aria-pressed=${t.id === value}
                onClick=${() => onChange(t.id)}>${t.id === value ? "Chosen" : "Use this template"}</button>`} />`)}
        </div>
      </div>`)}
    </fieldset>
    ${error ? html`<small class="field-error" id="e-template_id" data-testid="field-error-template_id">${error}</small>` : null}
  </div>`;
}

function TemplateVariables({ template, values, onChange, errors }) {
  if (!template.variables.length) return html`<p class="muted wide">${template.name} has no variables.</p>`;
  return html`<fieldset class="wide vars" data-testid="field-variables">
    <legend>Variables of ${template.name}</legend>
    ${template.variables.map((v) => {
      const key = "variables." + v.name;
      return html`<${Field} key=${v.name} label=${html`<span class="mono">${v.name}</span>${v.required ? html`<span class="req" aria-hidden="true"> *</span>` : null}`}
          name=${key} error=${errors[key]} hint=${v.description}>
        <input id=${"f-" + key} data-testid=${"field-" + key} value=${values[v.name] ?? ""} placeholder=${v.default ?? ""}
          aria-required=${v.required ? "true" : undefined} aria-invalid=${errors[key] ? "true" : undefined}
          onInput=${(e) => onChange({ ...values, [v.name]: e.currentTarget.value })} />
      </${Field}>`;
    })}
  </fieldset>`;
}
