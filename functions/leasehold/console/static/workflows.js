// Workflows: the list, and one workflow's graph (SVG) with each step's state; a step links to
// its job.

import { api } from "./api.js";
import { drawGraph } from "./dag.js";
import { badge, button, confirmAction, errorCell, h, link, notify, panel, replace, table, when }
  from "./dom.js";

const STATES = ["CREATING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"];

export async function renderList(main, query) {
  const state = query.get("state") || "";
  const select = h("select", { name: "state", "aria-label": "state" },
    h("option", { value: "" }, "any state"),
    STATES.map((s) => h("option", { value: s, selected: s === state }, s)));
  select.addEventListener("change", () => {
    location.hash = select.value ? `#/workflows?state=${select.value}` : "#/workflows";
  });
  const list = h("div");
  const more = h("div");
  replace(main, h("h1", {}, "Workflows"), h("form", { class: "filters" }, h("label", {}, "State ", select)),
    list, more);
  const found = [];
  let cursor = null;

  function draw() {
    replace(list, table(["workflow", "name", "state", "steps done", "created", "finished", "schedule"],
      found.map((w) => [
        link(`#/workflows/${w.workflow_id}`, w.workflow_id, { class: "mono" }), w.name || "—",
        badge(w.state), `${w.finished_steps} / ${w.step_count}`, when(w.created_at),
        when(w.finished_at), w.schedule_id ? link(`#/jobs?schedule=${w.schedule_id}`, w.schedule_id) : ""]),
      "No workflows. Start one with `leasehold workflow submit` or POST /workflows."));
    replace(more, cursor ? button("More workflows", () => page().catch((e) => notify(e.message, "error"))) : null);
  }

  async function page(reset = false) {
    const answer = await api("GET", "/workflows", { query: { state: state || undefined, limit: 50,
      cursor: reset ? undefined : cursor || undefined } });
    if (reset) found.length = 0;
    found.push(...answer.workflows);
    cursor = answer.next_cursor;
    draw();
  }

  await page(true);
  // Refresh the first page only while the reader has not paged on.
  return { refresh: () => (found.length <= 50 ? page(true) : Promise.resolve()), every: 5000 };
}

/** The states POST /workflows/{id}/retry resumes (workflows/rerun.py); others answer 409. */
const RETRYABLE = ["FAILED", "CANCELLED"];

/**
 * Retry: re-runs the failed and cancelled steps and every step after them. Disabled, with the
 * reason on hover, for a workflow in another state. The API may still refuse (409: a step's
 * row is gone, it is still cancelling, someone retried it meanwhile): its message is shown
 * and the page redrawn with the workflow as it is now.
 */
function retryButton(w, redraw) {
  if (!RETRYABLE.includes(w.state)) {
    const why = `Only a FAILED or CANCELLED workflow can be retried; this one is ${w.state}.`;
    // A disabled button gets no hover events in every browser: its wrapper holds the reason.
    return h("span", { title: why, "data-testid": "retry-reason" },
      button("Retry workflow", null, { disabled: true }));
  }
  return button("Retry workflow", async () => {
    let said = [`Retried workflow ${w.workflow_id}: its failed and cancelled steps and the `
      + "steps after them run again."];
    try {
      await api("POST", `/workflows/${w.workflow_id}/retry`);
    } catch (error) {
      said = [error.message, "error"];
    }
    // Redrawn before the message, so that the message speaks of the page as it is now.
    await redraw().catch((error) => { said = [error.message, "error"]; });
    notify(...said);
  }, { class: "primary" });
}

export async function renderOne(main, workflowId) {
  let last = null;

  async function draw() {
    const w = await api("GET", `/workflows/${workflowId}`);
    last = w;
    const cancel = w.state === "RUNNING" ? button("Cancel workflow", async () => {
      const running = w.steps.filter((s) => !["SUCCEEDED", "DEAD", "CANCELLED"].includes(s.state));
      if (!await confirmAction(`Cancel workflow ${w.name || workflowId}?`,
        `Its ${running.length} unfinished step(s) are cancelled; running ones stop at their next `
        + "heartbeat. Finished steps keep their results.", "Cancel workflow")) return;
      try {
        await api("DELETE", `/workflows/${workflowId}`);
        notify(`Cancelled workflow ${workflowId}.`);
        await draw();
      } catch (error) {
        notify(error.message, "error");
      }
    }) : null;
    replace(main,
      h("h1", {}, `Workflow ${w.name || ""} `, h("span", { class: "mono" }, w.workflow_id)),
      h("div", { class: "actions" }, badge(w.state), cancel, retryButton(w, draw),
        link("#/workflows", "All workflows"),
        link(`#/jobs?workflow=${w.workflow_id}`, "Its jobs")),
      w.reason ? h("p", { class: "error-text" }, w.reason) : null,
      h("p", { class: "muted" }, `${w.finished_steps} of ${w.step_count} steps finished · `,
        Object.entries(w.counts).map(([s, n]) => `${s} ${n}`).join(", ")),
      panel("Graph", h("div", { class: "graph" },
        drawGraph(w.steps, (step) => { location.hash = `#/jobs/${step.job_id}`; }))),
      panel("Steps", table(["step", "task", "state", "after", "attempts", "job", "error"],
        w.steps.map((s) => [s.id, s.task, badge(s.state), s.depends_on.join(", ") || "—",
          s.attempts, link(`#/jobs/${s.job_id}`, s.job_id, { class: "mono" }),
          errorCell(s.error)]))));
  }

  await draw();
  return { every: 2000, refresh: async () => { if (["CREATING", "RUNNING"].includes(last.state)) await draw(); } };
}
