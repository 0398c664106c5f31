// Dead letters: your DEAD jobs, each queue's dead-letter depth, and Redrive by pool and task.

import { api } from "./api.js";
import { button, confirmAction, errorCell, h, link, notify, panel, replace, table, when }
  from "./dom.js";

export async function render(main) {
  const stats = await api("GET", "/stats");
  const pools = [...new Set(stats.queues.map((q) => q.pool))];
  const depths = h("div");
  const list = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const pool = h("select", { name: "pool", "aria-label": "pool" },
    h("option", { value: "" }, "all pools"), pools.map((p) => h("option", { value: p }, p)));
  const task = h("input", { name: "task", placeholder: "any task", "aria-label": "task",
    autocomplete: "off" });
  const redrive = button("Redrive", async () => {
    const scope = `${pool.value ? `pool ${pool.value}` : "every pool"}`
      + `${task.value.trim() ? `, task ${task.value.trim()}` : ""}`;
    const listed = list.querySelectorAll("tbody tr").length;
    if (!await confirmAction(`Redrive the dead jobs of ${scope}?`,
      `Every DEAD job of yours in ${scope} (${listed} listed below) is queued to run again, `
      + "admitted like a new submission.", "Redrive")) return;
    try {
      // The API redrives one pool at a time; "all pools" asks each in turn.
      let redriven = 0;
      let stale = 0;
      for (const name of pool.value ? [pool.value] : pools) {
        const body = { pool: name };
        if (task.value.trim()) body.task = task.value.trim();
        const report = await api("POST", "/dead-letters/redrive", { body });
        redriven += report.redriven.length;
        stale += report.stale_removed;
      }
      notify(`Redriven ${redriven} job(s)`
        + (stale ? `; removed ${stale} dead-letter queue copies.` : "."));
      await load();
    } catch (error) {
      notify(error.message, "error");
    }
  }, { class: "primary" });
  const form = h("form", { class: "filters", "aria-label": "dead letter filters" },
    h("label", {}, "Pool ", pool), h("label", {}, "Task ", task),
    h("button", { type: "submit" }, "Show"), redrive);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    load().catch((error) => notify(error.message, "error"));
  });
  replace(main, h("h1", {}, "Dead letters"),
    h("p", { class: "muted" }, "Jobs that ran out of attempts. Redrive queues them again; "
      + "Retry on a job does the same for one."),
    form, list, panel("Dead-letter queues", h("p", { class: "muted" },
      "Copies of DEAD jobs, every tenant's: a redrive removes yours."), depths));

  async function load() {
    const [page, now] = await Promise.all([
      api("GET", "/dead-letters", { query: { pool: pool.value || undefined,
        task: task.value.trim() || undefined, limit: 200 } }),
      api("GET", "/stats"),
    ]);
    replace(list, table(["job", "task", "pool", "attempts", "error", "died"],
      page.jobs.map((job) => [
        link(`#/jobs/${job.job_id}`, job.job_id, { class: "mono" }), job.task, job.pool,
        job.attempts,
        errorCell(job.error),
        when(job.finished_at)]),
      "No dead letters."));
    replace(depths, table(["pool", "priority", "messages in the DLQ"],
      now.queues.map((q) => [q.pool, q.priority, q.dead_letters])));
  }

  await load();
  return { refresh: load, every: 5000 };
}
