// Building the page from data without innerHTML, so no job payload is ever read as markup.

const SVG_NS = "http://www.w3.org/2000/svg";

export function h(tag, attrs, ...children) {
  const svg = tag.startsWith("svg:");
  const el = svg ? document.createElementNS(SVG_NS, tag.slice(4)) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  fill(el, ...children);
  return el;
}

export function fill(el, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function replace(el, ...children) {
  el.replaceChildren();
  return fill(el, ...children);
}

export function badge(state) {
  return h("span", { class: `badge state-${state}` }, state);
}

/** A time as the reader's local time, with the UTC instant on hover. */
export function when(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const date = new Date(iso);
  return h("time", { datetime: iso, title: iso }, date.toLocaleString());
}

export function ago(iso, now = Date.now()) {
  if (!iso) return "—";
  const seconds = Math.max(0, (now - new Date(iso).getTime()) / 1000);
  if (seconds < 90) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min ago`;
  return `${Math.round(seconds / 3600)} h ago`;
}

export function json(value) {
  return h("pre", { class: "json" }, value === undefined ? "null" : JSON.stringify(value, null, 2));
}

export function link(href, text, attrs = {}) {
  return h("a", { href, ...attrs }, text);
}

export function table(headers, rows, empty = "Nothing here yet.") {
  if (!rows.length) return h("p", { class: "muted empty" }, empty);
  // The table scrolls sideways inside its own box: on a narrow screen the page does not.
  return h("div", { class: "scroll" }, h("table", {},
    h("thead", {}, h("tr", {}, headers.map((name) => h("th", { scope: "col" }, name)))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((cell) => h("td", {}, cell)))))));
}

/** A span of seconds as a person reads it: "850 ms", "12.4 s", "4 min 5 s", "3 h 12 min". */
export function span(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "—";
  const s = Math.abs(seconds);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

/**
 * Asks before a destructive action, in a modal dialog that names what will happen.
 * Resolves true only when the reader presses the confirming button.
 */
export function confirmAction(question, detail, confirmLabel) {
  return new Promise((resolve) => {
    const dialog = h("dialog", { class: "confirm", "aria-label": question });
    const close = (answer) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    fill(dialog,
      h("h2", {}, question),
      detail ? h("p", {}, detail) : null,
      h("div", { class: "actions" },
        h("button", { type: "button", class: "danger", onclick: () => close(true) }, confirmLabel),
        h("button", { type: "button", onclick: () => close(false) }, "Go back")));
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      close(false);
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

export function button(text, onclick, attrs = {}) {
  return h("button", { type: "button", onclick, ...attrs }, text);
}

export function panel(title, ...children) {
  return h("section", { class: "panel", "aria-label": title }, h("h2", {}, title), ...children);
}

/** Shows a message above the page: an error in red, anything else as a plain note. */
export function notify(message, kind = "info") {
  const notice = document.getElementById("notice");
  if (!message) {
    notice.hidden = true;
    notice.replaceChildren();
    return;
  }
  notice.hidden = false;
  notice.className = kind;
  replace(notice, message);
}

/**
 * A job's error in a table cell: one line, cut with an ellipsis to fit its column (a long
 * message never widens the table); the whole text on hover, and unfolded by a click or Enter.
 */
export function errorCell(error) {
  if (!error) return "";
  const text = `${error.type}: ${error.message}`;
  const toggle = (event) => {
    if (event.type === "keydown" && event.key !== "Enter" && event.key !== " ") return;
    event.preventDefault();
    const open = event.currentTarget.classList.toggle("open");
    event.currentTarget.setAttribute("aria-expanded", String(open));
  };
  return h("span", { class: "error-text clip", title: text, tabindex: 0, role: "button",
    "aria-expanded": "false", onclick: toggle, onkeydown: toggle }, text);
}
