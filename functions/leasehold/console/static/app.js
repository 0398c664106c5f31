// The page's router: #/, #/jobs, #/jobs/<id>, #/schedules, #/workflows, #/workflows/<id>,
// #/dead-letters, #/triggers, #/workers, #/tasks, #/keys. Each page renders into <main> and may ask
// to be refreshed every few seconds.

import { api, recentTenants, setTenant, tenant } from "./api.js";
import { h, link, notify, replace } from "./dom.js";
import * as deadLetters from "./deadletters.js";
import * as jobs from "./jobs.js";
import * as keys from "./keys.js";
import * as overview from "./overview.js";
import * as schedules from "./schedules.js";
import * as tasks from "./tasks.js";
import * as triggers from "./triggers.js";
import * as workers from "./workers.js";
import * as workflows from "./workflows.js";

const ROUTES = [
  [/^$/, "overview", (main) => overview.render(main)],
  [/^jobs$/, "jobs", (main, query) => jobs.renderList(main, query)],
  [/^jobs\/([0-9A-Za-z]+)$/, "jobs", (main, query, id) => jobs.renderJob(main, id)],
  [/^schedules$/, "schedules", (main) => schedules.render(main)],
  [/^workflows$/, "workflows", (main, query) => workflows.renderList(main, query)],
  [/^workflows\/([0-9A-Za-z]+)$/, "workflows", (main, query, id) => workflows.renderOne(main, id)],
  [/^dead-letters$/, "dead-letters", (main) => deadLetters.render(main)],
  [/^triggers$/, "triggers", (main) => triggers.render(main)],
  [/^workers$/, "workers", (main) => workers.render(main)],
  [/^tasks$/, "tasks", (main) => tasks.render(main)],
  [/^keys$/, "keys", (main) => keys.render(main)],
];

let current = null; // { timer, generation }
let generation = 0;

function stopCurrent() {
  if (current && current.timer) clearInterval(current.timer);
  current = null;
}

async function show() {
  stopCurrent();
  notify(null);
  const mine = ++generation;
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, search] = raw.split("?");
  const query = new URLSearchParams(search || "");
  const main = document.getElementById("view");
  const route = ROUTES.find(([pattern]) => pattern.test(path));
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", Boolean(route) && a.dataset.page === route[1]);
  }
  if (!route) {
    replace(main, h("section", { class: "not-found", "aria-label": "not found" },
      h("h1", {}, "No such page"),
      h("p", {}, `No page at #/${path}. `, link("#/", "Overview"))));
    return;
  }
  const [pattern, , render] = route;
  const match = pattern.exec(path);
  // Each visit renders into its own element: a slow answer for a page the reader has left
  // lands in a detached element instead of over the page they are on now.
  const view = h("div", { class: "page" }, h("p", { class: "muted" }, "Loading…"));
  replace(main, view);
  let page;
  try {
    page = await render(view, query, ...match.slice(1));
  } catch (error) {
    if (mine !== generation) return;
    if (error.status === 404) {
      // An unknown id is an answer, not a wait: say so in place of "Loading…".
      replace(view, notFound(path, error));
    } else {
      replace(view, h("p", { class: "error-text" }, "This page could not load: ", error.message));
      notify(error.message, "error");
    }
    return;
  }
  if (mine !== generation || !page || !page.refresh) return;
  let failed = false;
  const timer = setInterval(async () => {
    try {
      await page.refresh();
      if (failed) notify(null); // the API answers again: clear the error refreshing showed
      failed = false;
    } catch (error) {
      failed = true;
      notify(error.message, "error");
    }
  }, page.every || 3000);
  current = { timer, generation: mine };
}

function notFound(path, error) {
  const [kind, id] = path.split("/");
  const what = { jobs: "job", workflows: "workflow" }[kind] || "page";
  const who = tenant() || "default";
  return h("section", { class: "not-found", "aria-label": "not found" },
    h("h1", {}, `No such ${what}`),
    h("p", {}, id ? [`There is no ${what} `, h("code", {}, id), ` for tenant ${who}. `] : "",
      "It may belong to another tenant (pick it above), be mistyped, or be gone."),
    h("p", { class: "muted" }, error.message),
    h("p", {}, link(`#/${kind}`, `All ${kind}`), " · ", link("#/", "Overview")));
}

async function showTenant() {
  const input = document.getElementById("tenant");
  input.value = tenant();
  replace(document.getElementById("tenants"),
    recentTenants().map((name) => h("option", { value: name })));
  // Behind API Gateway the identity decides the tenant: show the one the API used.
  const seen = document.getElementById("tenant-seen");
  try {
    const stats = await api("GET", "/stats");
    const chosen = tenant() || "default";
    replace(seen, stats.tenant === chosen ? "" : `(the API uses ${stats.tenant})`);
  } catch {
    replace(seen, "");
  }
}

function start() {
  const form = document.getElementById("tenant-form");
  const input = document.getElementById("tenant");
  const apply = () => {
    if (input.value.trim() === tenant()) return;
    setTenant(input.value);
    overview.forget();
    showTenant();
    show();
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    apply();
  });
  input.addEventListener("change", apply);
  window.addEventListener("hashchange", show);
  showTenant();
  show();
}

start();
