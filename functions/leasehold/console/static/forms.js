// Small form helpers shared by the pages that create things (jobs, schedules, triggers).

import { h } from "./dom.js";

/** A labelled input; ``attrs`` go to the input (name, placeholder, required ...). */
export function field(label, attrs) {
  const tag = attrs.rows ? "textarea" : "input";
  return h("label", {}, label, h(tag, { autocomplete: "off", ...attrs }));
}

/** A labelled select of ``options`` (first one chosen unless ``value`` names another). */
export function choice(label, name, options, value) {
  return h("label", {}, label, h("select", { name },
    options.map(([v, text]) => h("option", { value: v, selected: v === (value ?? "") }, text))));
}

/** Parses a JSON field, naming the field in the error a person sees. */
export function parseJson(text, what) {
  if (!text.trim()) return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not JSON: ${error.message}`);
  }
}

/** The form's non-empty text fields as an object (names as the API spells them). */
export function values(form) {
  const out = {};
  for (const [key, value] of new FormData(form)) {
    if (String(value).trim() !== "") out[key] = String(value).trim();
  }
  return out;
}

export const PRIORITIES = [["", "default"], ["high", "high"], ["normal", "normal"], ["low", "low"]];
