// Bulk actions on the jobs page's current filter (POST /jobs/bulk): a dry run counts the jobs
// the action would touch, a confirmation names that count, then the bulk job's progress is
// followed at GET /jobs/bulk/{id} until it finishes.
//
// The confirmed action carries the dry run's bound (created_before): it acts only on jobs
// created up to the count, so a job submitted between the count and the confirmation is
// never touched. A counted job that changed meanwhile (finished, retried by someone else) is
// skipped by the bulk job's fenced writes and counted as skipped.

import { api, TERMINAL } from "./api.js";
import { button, confirmAction, h, link, notify, replace, when } from "./dom.js";

/** The states each action applies to: the API's ``bulk/actions.py`` APPLIES_TO (a unit test,
 * tests/unit/test_console_assets.py, holds the two equal). */
const APPLIES_TO = {
  retry: ["DEAD", "CANCELLED"],
  cancel: ["SCHEDULED", "WAITING", "QUEUED", "RUNNING", "SLEEPING"],
  delete: ["SUCCEEDED", "DEAD", "CANCELLED", "EXPIRED"],
};
const VERBS = { retry: ["Retry", "retried"], cancel: ["Cancel", "cancelled"],
  delete: ["Delete", "deleted"] };
const CONSEQUENCE = {
  retry: "Each is queued to run again, admitted like a new submission.",
  cancel: "Waiting ones will not run; running ones stop at their next heartbeat.",
  delete: "Their rows are removed for good. Rows a workflow or a live durable job still "
    + "references are kept and counted apart.",
};
const POLL_MS = 1000;

/** The actions the filter's states leave something to act on: all three with no state. */
export function actionsFor(states) {
  return Object.keys(APPLIES_TO).filter((action) => !states.length
    || states.some((state) => APPLIES_TO[action].includes(state)));
}

const jobs = (n) => `${n} job${n === 1 ? "" : "s"}`;

function keptText(referencedBy) {
  const parts = Object.entries(referencedBy || {}).map(([why, n]) => `${n} by a ${why}`);
  return parts.length ? `kept because still referenced: ${parts.join(", ")}` : "";
}

/** What a bulk job did so far, or in the end: "3 retried, 1 skipped (...)". */
function tallyText(action, tally) {
  const parts = [`${tally.done || 0} ${VERBS[action][1]}`, `${tally.skipped || 0} skipped`];
  const kept = keptText(tally.referenced_by);
  return parts.join(", ") + (kept ? `, ${kept}` : "");
}

/**
 * The bulk bar for the jobs page: ``filter`` is what the table lists (``state`` list,
 * ``task``, ``id_prefix``, ``label``), ``scope`` says whether the page lists a schedule's or
 * a workflow's jobs instead (the bulk API takes neither), ``after`` reloads the table.
 */
export function bulkBar(filter, { scheduleId, workflowId, after } = {}) {
  const bar = h("details", { class: "panel bulk", "aria-label": "Bulk actions" },
    h("summary", {}, "Bulk actions on this filter"));
  if (scheduleId || workflowId) {
    bar.append(h("p", { class: "muted" }, "Bulk actions take the state, task, id prefix and "
      + "label filters, not a schedule's runs or a workflow's steps. ",
    workflowId ? link(`#/workflows/${workflowId}`, "Retry the workflow from its page.") : ""));
    return bar;
  }
  const body = {
    state: filter.state || [], task: filter.task || undefined,
    id_prefix: filter.id_prefix || undefined, label: filter.label ? [].concat(filter.label) : [],
  };
  const offered = actionsFor(body.state);
  const action = h("select", { name: "action", "aria-label": "bulk action" },
    offered.map((name) => h("option", { value: name }, VERBS[name][0])));
  const status = h("div", { class: "bulk-status", "data-testid": "bulk-status",
    "aria-live": "polite" });
  const count = button("Count", () => preview().catch(fail));
  action.addEventListener("change", () => replace(status)); // a count is for one action
  const scope = [body.state.length ? `state ${body.state.join(", ")}` : "any state",
    body.task ? `task ${body.task}` : null, body.id_prefix ? `id ${body.id_prefix}…` : null,
    ...body.label.map((l) => `label ${l}`)].filter(Boolean).join(" · ");
  bar.append(
    h("p", { class: "muted" }, `Every job this filter matches, not only this page (${scope}). `
      + "Count first: the action then touches only jobs created up to the count."),
    offered.length
      ? h("div", { class: "actions" }, h("label", {}, "Action ", action), count)
      : h("p", { class: "muted" }, "No bulk action applies to these states."),
    status);

  function fail(error) {
    replace(status, h("p", { class: "error-text" }, error.message));
    notify(error.message, "error");
  }

  async function preview() {
    const chosen = action.value;
    const [verb, done] = VERBS[chosen];
    const answer = await api("POST", "/jobs/bulk",
      { body: { action: chosen, filter: body, dry_run: true } });
    // An incomplete count stopped early (the API reads a bounded number of pages).
    const n = `${answer.complete ? "" : "at least "}${jobs(answer.matches)}`;
    const kept = keptText(answer.referenced_by);
    const counted = h("p", {}, h("strong", { "data-testid": "bulk-count" }, n),
      ` would be ${done} (created up to `, when(answer.created_before), ").",
      kept ? ` ${answer.skipped_referenced} more ${kept}.` : "");
    if (!answer.matches) {
      replace(status, counted);
      return;
    }
    const question = `${verb} ${n}?`;
    const go = button(`${verb} ${n}…`, async () => {
      if (!await confirmAction(question, `${CONSEQUENCE[chosen]} Only the jobs counted at `
        + `${new Date(answer.created_before).toLocaleString()} are touched: jobs submitted `
        + "since are left alone, and a counted job that changed meanwhile is skipped.",
      `${verb} ${n}`)) return;
      go.disabled = true; // one bulk job per count
      start(chosen, answer.created_before).catch(fail);
    }, { class: "danger" });
    replace(status, counted, h("div", { class: "actions" }, go));
  }

  async function start(chosen, createdBefore) {
    // The dry run's bound: the action touches only what was counted (or less, if changed).
    const started = await api("POST", "/jobs/bulk",
      { body: { action: chosen, filter: { ...body, created_before: createdBefore } } });
    notify(h("span", {}, `Bulk ${chosen} started: `, link(`#/jobs/${started.bulk_id}`,
      started.bulk_id, { class: "mono" }), "."));
    await follow(chosen, started);
  }

  async function follow(chosen, bulk) {
    const line = h("p", { "data-testid": "bulk-progress" });
    replace(status, line);
    for (;;) {
      const tally = bulk.result || bulk.progress || {};
      const finished = TERMINAL.has(bulk.state);
      replace(line, `Bulk ${chosen} `, link(`#/jobs/${bulk.bulk_id}`, bulk.bulk_id,
        { class: "mono" }), " ", h("span", { class: `badge state-${bulk.state}` }, bulk.state),
      `: ${tallyText(chosen, tally)}`,
      tally.paused ? ` (${tally.paused})` : "",
      bulk.error ? h("span", { class: "error-text" }, ` ${bulk.error.type}: ${bulk.error.message}`)
        : "");
      if (finished) {
        if (after) await after();
        return;
      }
      // The reader left the page or counted again: the bulk job goes on; its job page (the
      // link) shows how it ends.
      await new Promise((resolve) => { setTimeout(resolve, POLL_MS); });
      if (!line.isConnected) return;
      bulk = await api("GET", `/jobs/bulk/${bulk.bulk_id}`);
    }
  }

  return bar;
}
