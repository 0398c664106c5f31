// Workers: the live worker processes (GET /workers), with the jobs each is running now.

import { api } from "./api.js";
import { ago, h, link, notify, replace, table } from "./dom.js";

export function workersTable(workers, now = Date.now()) {
  return table(
    ["worker", "pool", "host", "started", "last heartbeat", "running now", "processed"],
    workers.map((w) => [h("span", { class: "mono" }, w.worker_id), w.pool,
      w.kind === "remote" ? h("span", { title: "a worker in any language, leasing over HTTP" }, "remote (HTTP lease)")
        : `${w.host} (pid ${w.pid})`,
      h("span", { title: w.started_at }, ago(w.started_at, now)),
      h("span", { title: w.last_heartbeat }, ago(w.last_heartbeat, now)),
      w.current_jobs.length
        ? w.current_jobs.map((id) => [link(`#/jobs/${id}`, id.slice(-8), { title: id, class: "mono" }), " "])
        : h("span", { class: "muted" }, "idle"),
      w.processed]),
    "No live workers.");
}

export async function render(main) {
  const pool = h("input", { name: "pool", placeholder: "any pool", "aria-label": "pool", autocomplete: "off" });
  const list = h("div");
  const form = h("form", { class: "filters", "aria-label": "worker filters" },
    h("label", {}, "Pool", pool), h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    load().catch((error) => notify(error.message, "error"));
  });
  replace(main, h("h1", {}, "Workers"),
    h("p", { class: "muted" }, "Worker processes with a recent heartbeat, and the jobs each holds "
      + "a lease on now; remote workers (any language) as of their last lease request. A worker "
      + "that goes quiet drops off this list."),
    form, list);

  async function load() {
    const fleet = await api("GET", "/workers", { query: { pool: pool.value.trim() || undefined } });
    replace(list, workersTable(fleet.workers));
  }

  await load();
  return { refresh: load, every: 5000 };
}
