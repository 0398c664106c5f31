// Keys: your concurrency keys (in use of their limit, paused, the jobs waiting for a slot),
// Pause and Resume per key, and per pool for operators (a pool is shared by every tenant).

import { api } from "./api.js";
import { button, confirmAction, h, link, notify, panel, replace, table } from "./dom.js";

export async function render(main) {
  const keys = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const pools = h("div");
  replace(main, h("h1", {}, "Keys"),
    h("p", { class: "muted" }, "Concurrency keys in use by your jobs. A job over its key's "
      + "limit waits, parked, and starts as soon as a slot frees. A paused key starts "
      + "nothing new; its running jobs finish and its waiting jobs stay queued."),
    keys, panel("Pools", h("p", { class: "muted" }, "Pausing a pool stops its workers "
      + "receiving: queued work waits, nothing is lost. Pools are shared, so only an "
      + "operator (LEASEHOLD_OPERATORS) may pause one."), pools));

  async function act(key, action) {
    if (action === "pause" && !await confirmAction(`Pause key ${key}?`,
      "No job with this key starts until you resume it.", "Pause")) return;
    try {
      const answer = await api("POST", `/flow/keys/${encodeURIComponent(key)}/${action}`);
      notify(`Key ${key} ${answer.paused ? "paused" : "resumed"}.`);
      await load();
    } catch (error) {
      notify(error.message, "error");
    }
  }

  async function pool(name, action) {
    if (action === "pause" && !await confirmAction(`Pause pool ${name}?`,
      "Its workers receive nothing until it is resumed, for every tenant.", "Pause")) return;
    try {
      const answer = await api("POST", `/pools/${encodeURIComponent(name)}/${action}`);
      notify(`Pool ${answer.pool} ${answer.paused ? "paused" : "resumed"}.`);
    } catch (error) {
      notify(error.status === 403 ? `Only an operator may ${action} a pool: ${error.message}`
        : error.message, "error");
    }
  }

  async function load() {
    const [found, stats] = await Promise.all([api("GET", "/flow/keys"), api("GET", "/stats")]);
    replace(keys, table(["key", "in use", "state", "waiting", "waiting jobs", ""],
      found.keys.map((k) => [
        h("code", {}, k.key),
        k.limit ? `${k.in_use} of ${k.limit}` : `${k.in_use}`,
        k.paused ? h("span", { class: "badge state-CANCELLED" }, "paused") : "running",
        k.waiting,
        k.waiting_jobs.map((id) => h("div", {}, link(`#/jobs/${id}`, id, { class: "mono" }))),
        k.paused ? button("Resume", () => act(k.key, "resume"), { "aria-label": `resume ${k.key}` })
          : button("Pause", () => act(k.key, "pause"), { "aria-label": `pause ${k.key}` }),
      ]), "No concurrency key is in use."));
    const names = [...new Set(stats.queues.map((q) => q.pool))];
    replace(pools, table(["pool", ""], names.map((name) => [name, h("span", {},
      button("Pause", () => pool(name, "pause"), { "aria-label": `pause pool ${name}` }), " ",
      button("Resume", () => pool(name, "resume"), { "aria-label": `resume pool ${name}` }))])));
  }

  await load();
  return { refresh: load, every: 3000 };
}
