// The submit form's task and payload, from GET /tasks: the registered tasks in a list, and for
// a typed task (`@task(..., input=Model)`) one field per property of its input schema when
// every property is simple (string, number, integer, boolean, enum). Anything else (nested
// objects, lists, an untyped task) keeps the JSON textarea. The server checks the payload
// either way; a 422 naming `payload.<field>` marks that field.

import { api } from "./api.js";
import { h, replace } from "./dom.js";
import { field, parseJson } from "./forms.js";

const PREFIX = "payload.";

/** `{kind, spec}` for a property the form can show as one input, else null. */
function simple(root, prop) {
  let spec = prop;
  if (spec.$ref) spec = (root.$defs || {})[spec.$ref.split("/").pop()] || {};
  if (Array.isArray(spec.anyOf)) {  // Optional[X]: X, or nothing
    const others = spec.anyOf.filter((p) => p.type !== "null");
    if (others.length !== 1) return null;
    const inner = simple(root, others[0]);
    return inner && { ...inner, spec: { ...inner.spec, default: prop.default ?? inner.spec.default } };
  }
  if (Array.isArray(spec.enum)) return { kind: "enum", spec: { ...spec, default: prop.default ?? spec.default } };
  if (["string", "number", "integer", "boolean"].includes(spec.type)) return { kind: spec.type, spec };
  return null;
}

/** The fields of an input schema, or null when it needs the JSON textarea. */
export function fieldsOf(schema) {
  if (!schema || schema.type !== "object" || !schema.properties) return null;
  const required = new Set(schema.required || []);
  const out = [];
  for (const [name, prop] of Object.entries(schema.properties)) {
    const found = simple(schema, prop);
    if (!found) return null;
    out.push({ name, required: required.has(name), title: prop.title || name, ...found });
  }
  return out;
}

function input(one) {
  const name = PREFIX + one.name;
  const label = one.title + (one.required ? "" : " (optional)");
  const hint = one.spec.description || undefined;
  const initial = one.spec.default;
  if (one.kind === "boolean") {
    return h("label", {}, label, h("input", { name, type: "checkbox", checked: initial === true, title: hint }));
  }
  if (one.kind === "enum") {
    const options = one.spec.enum.map((v, i) => h("option", { value: String(i), selected: v === initial }, String(v)));
    return h("label", {}, label, h("select", { name, title: hint },
      one.required && initial === undefined ? null : h("option", { value: "", selected: initial === undefined }, "—"),
      options));
  }
  const number = one.kind === "number" || one.kind === "integer";
  // No min/max here: the server's answer names the field and says why, for every client alike.
  return h("label", {}, label, h("input", {
    name, type: number ? "number" : "text", step: one.kind === "integer" ? "1" : number ? "any" : undefined,
    value: initial === undefined || initial === null ? undefined : String(initial),
    placeholder: hint, autocomplete: "off" }));
}

/** The task list and payload part of the submit form: `task` and `payload` go in the form;
 * `read(form)` gives the payload (or undefined); `mark(error)` flags the field an error names;
 * `refresh()` follows the task field after a reset. */
export function taskFields() {
  const names = h("datalist", { id: "task-names" });
  const task = field("Task", { name: "task", placeholder: "e.g. echo", required: true, list: "task-names" });
  const json = field("Payload (JSON)", { name: "payload", rows: 1, placeholder: '{"to": "ops"}' });
  const typed = h("fieldset", { class: "payload-fields", hidden: true });
  const known = new Map();
  let shown = null;  // the fields of the task chosen, when it has a form of its own

  let showing;  // the task whose fields are shown: leaving the field must not clear them
  function show() {
    const chosen = known.get(task.querySelector("input").value.trim());
    if (chosen === showing) return;
    showing = chosen;
    shown = chosen ? fieldsOf(chosen.input) : null;
    typed.hidden = !shown;
    json.hidden = Boolean(shown);
    replace(typed, shown ? [h("legend", {}, `Payload of ${chosen.name}`), shown.map(input)] : []);
  }

  task.querySelector("input").addEventListener("input", show);
  task.querySelector("input").addEventListener("change", show);
  api("GET", "/tasks").then((answer) => {
    for (const one of answer.tasks) known.set(one.name, one);
    replace(names, answer.tasks.map((one) => h("option", { value: one.name }, one.pool)));
    show();
  }, () => {});  // an older API without /tasks: the textarea still works

  function read(form) {
    for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
    if (!shown) return parseJson(form.elements.payload.value, "the payload");
    const payload = {};
    for (const one of shown) {
      const el = form.elements[PREFIX + one.name];
      if (one.kind === "boolean") payload[one.name] = el.checked;
      else if (el.value.trim() === "") continue;  // left out: the model's default, or "Field required"
      else if (one.kind === "enum") payload[one.name] = one.spec.enum[Number(el.value)];
      else if (one.kind === "string") payload[one.name] = el.value;
      else payload[one.name] = Number(el.value);
    }
    return payload;
  }

  function mark(error) {
    const at = error && error.field;
    if (!at || !at.startsWith(PREFIX)) return;
    const el = typed.querySelector(`[name="${CSS.escape(at.split(/[.[]/).slice(0, 2).join("."))}"]`)
      || json.querySelector("textarea");
    if (el) {
      el.setAttribute("aria-invalid", "true");
      el.focus();
    }
  }

  return { task: [task, names], payload: [json, typed], read, mark, refresh: show };
}
