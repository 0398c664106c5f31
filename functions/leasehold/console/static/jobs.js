// Jobs: a filtered, cursor-paged list, and one job with its payload, result or error,
// attempts, history timeline and the Cancel and Retry buttons.

import { api, STATES, TERMINAL } from "./api.js";
import { bulkBar } from "./bulk.js";
import { badge, button, confirmAction, errorCell, h, json, link, notify, panel, replace, span, table,
  when } from "./dom.js";
import { choice, field, PRIORITIES, values } from "./forms.js";
import { targetForm } from "./targetform.js";
import { taskFields } from "./taskform.js";
import { waterfall } from "./waterfall.js";

const PAGE = 25;

/** Rows a page: ``#/jobs?limit=`` (1 to 200, the API's bounds), else 25. */
function pageSize(query) {
  const asked = Number.parseInt(query.get("limit") || "", 10);
  return Number.isInteger(asked) ? Math.min(200, Math.max(1, asked)) : PAGE;
}

function filterForm(query) {
  const filter = (name, label, placeholder) => h("label", {}, label,
    h("input", { name, value: query.get(name) || "", placeholder, autocomplete: "off" }));
  const chosen = new Set(query.getAll("state"));
  const form = h("form", { class: "filters", "aria-label": "job filters" },
    h("label", {}, "State",
      h("select", { name: "state" },
        h("option", { value: "" }, "any"),
        STATES.map((s) => h("option", { value: s, selected: chosen.size === 1 && chosen.has(s) }, s)),
        chosen.size > 1 ? h("option", { value: [...chosen].join(","), selected: true }, "live") : null)),
    filter("q", "Id prefix", "job id or its start"),
    filter("label", "Label", "key:value"),
    filter("task", "Task", "e.g. echo"),
    filter("schedule", "Schedule", "schedule id"),
    filter("workflow", "Workflow", "workflow id"),
    h("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const [key, value] of new FormData(form)) {
      for (const item of String(value).split(",")) if (item.trim()) next.append(key, item.trim());
    }
    if (query.get("limit")) next.set("limit", query.get("limit"));
    location.hash = `#/jobs${next.toString() ? `?${next}` : ""}`;
  });
  return form;
}

const seconds = (from, to) => (new Date(to).getTime() - new Date(from).getTime()) / 1000;

/** When a job that has not started is due: "in 4 min 3 s", or "overdue 2 s" once past. */
export function dueIn(job, now = Date.now()) {
  if (job.started_at || TERMINAL.has(job.state) || !job.run_at) return h("span", { class: "muted" }, "—");
  const left = seconds(now, job.run_at);
  return h("span", { class: left < 0 ? "due overdue" : "due", title: job.run_at },
    left < 0 ? `overdue ${span(-left)}` : `in ${span(left)}`);
}

/** How long the job ran (its last run), or has been running so far. */
export function duration(job, now = Date.now()) {
  if (!job.started_at) return h("span", { class: "muted" }, "—");
  if (job.finished_at) return span(seconds(job.started_at, job.finished_at));
  return job.state === "RUNNING" ? `${span(seconds(job.started_at, now))} so far` : "—";
}

function row(job) {
  return [
    link(`#/jobs/${job.job_id}`, job.job_id, { class: "mono" }),
    job.task,
    badge(job.state),
    `${job.pool} / ${job.priority}`,
    `${job.attempts} / ${job.max_attempts}`,
    when(job.created_at),
    dueIn(job),
    duration(job),
    when(job.finished_at),
    errorCell(job.error),
  ];
}

const HEADERS = ["job", "task", "state", "pool / priority", "attempts", "created", "due in",
  "duration", "finished", ""];

/** "key:value" (or "key=value") as the pair it names. */
function labelPair(text) {
  const match = /^([^:=]+)[:=](.*)$/.exec(text || "");
  return match ? [match[1].trim(), match[2].trim()] : null;
}

function labelsOf(text) {
  const out = {};
  for (const item of (text || "").split(",")) {
    const pair = labelPair(item.trim());
    if (pair) out[pair[0]] = pair[1];
  }
  return out;
}

/** The flow-control options as the API nests them: ``[option, field, label, number?]``. */
const FLOW = [
  ["concurrency", "key", "Concurrency key"], ["concurrency", "limit", "Concurrency limit", true],
  ["throttle", "key", "Throttle key"], ["throttle", "limit", "Throttle limit", true],
  ["throttle", "period_seconds", "Throttle period (s)", true],
  ["throttle", "burst", "Throttle burst", true],
  ["debounce", "key", "Debounce key"], ["debounce", "seconds", "Debounce (s)", true],
  ["debounce", "max_wait_seconds", "Debounce max wait (s)", true],
  ["unique", "key", "Unique key"],
];

/** Flow control, folded away: per-job keys (a task's templates apply when left empty). */
function flowFields() {
  return h("details", { class: "flow" }, h("summary", {}, "Flow control"),
    FLOW.map(([option, name, label, number]) => field(label, {
      name: `${option}.${name}`,
      ...(number ? { type: "number", min: 0, step: "any" } : { placeholder: "e.g. customer:42" }),
    })),
    field("Start within (s)", { name: "start_within_seconds", type: "number", min: 0, step: "any" }));
}

/** ``{"throttle.key": "k", ...}`` -> ``{throttle: {key: "k"}}``; numbers as numbers. The API
 * says what a partial option lacks (a limit without its key is a 422 naming the field). */
function flowOptions(body) {
  for (const [option, name, , number] of FLOW) {
    const flat = `${option}.${name}`;
    if (!(flat in body)) continue;
    body[option] = { ...body[option], [name]: number ? Number(body[flat]) : body[flat] };
    delete body[flat];
  }
  if ("start_within_seconds" in body) body.start_within_seconds = Number(body.start_within_seconds);
  return body;
}

function submitForm() {
  const chosen = taskFields();
  const form = h("form", { class: "filters", "aria-label": "submit a job" },
    chosen.task,
    chosen.payload,
    field("Pool", { name: "pool", placeholder: "default" }),
    choice("Priority", "priority", PRIORITIES),
    field("Delay (s)", { name: "delay_seconds", type: "number", min: 0, step: "any" }),
    field("Max attempts", { name: "max_attempts", type: "number", min: 1, max: 100 }),
    field("Labels", { name: "labels", placeholder: "env:prod, team:ops" }),
    flowFields(),
    h("button", { type: "submit" }, "Submit"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const body = flowOptions(Object.fromEntries(Object.entries(values(form))
        .filter(([key]) => key !== "payload" && !key.startsWith("payload."))));
      const payload = chosen.read(form);
      if (payload !== undefined) body.payload = payload;
      if ("delay_seconds" in body) body.delay_seconds = Number(body.delay_seconds);
      if ("max_attempts" in body) body.max_attempts = Number(body.max_attempts);
      if ("labels" in body) body.labels = labelsOf(body.labels);
      const job = await api("POST", "/jobs", { body });
      const linked = link(`#/jobs/${job.job_id}`, job.job_id);
      notify(job.duplicate ? h("span", {}, "Not submitted: ", linked, " is live with that unique key.")
        : job.coalesced ? h("span", {}, "Debounced into ", linked, ", with this payload.")
          : h("span", {}, "Submitted ", linked, "."));
      form.reset();
      chosen.refresh();
    } catch (error) {
      notify(error.message, "error");
      chosen.mark(error);
    }
  });
  return h("details", { class: "panel submit" }, h("summary", {}, "Submit a job"), form);
}

/** A workflow's steps are its jobs: its graph lists them, so no other endpoint is needed. */
async function workflowSteps(workflowId) {
  const workflow = await api("GET", `/workflows/${encodeURIComponent(workflowId)}`);
  return workflow.steps.map((step) => ({ ...step, step_id: step.id }));
}

function stepRow(step) {
  return [
    link(`#/jobs/${step.job_id}`, step.job_id, { class: "mono" }),
    step.task,
    badge(step.state),
    step.step_id,
    step.attempts,
    when(step.started_at),
    when(step.finished_at),
    errorCell(step.error),
  ];
}

const STEP_HEADERS = ["job", "task", "state", "step", "attempts", "started", "finished", ""];

export async function renderList(main, query) {
  const results = h("div", { class: "results" });
  const pager = h("nav", { class: "pager", "aria-label": "pages" });
  replace(main, h("h1", {}, "Jobs"), submitForm(), targetForm(), filterForm(query), results,
    pager);
  const states = query.getAll("state");
  const task = query.get("task") || undefined;
  const idPrefix = query.get("q") || undefined;
  const label = query.get("label") || undefined;
  const pair = labelPair(label);
  const scheduleId = query.get("schedule") || undefined;
  const workflowId = query.get("workflow") || undefined;
  // Bulk actions (bulk.js) act on what this table lists: its filter, every page of it.
  results.before(bulkBar({ state: states, task, id_prefix: idPrefix, label },
    { scheduleId, workflowId, after: () => load().catch(fail) }));
  // The API's cursor pages forward; remembering the cursors read so far pages back.
  const cursors = [null];

  // The page applies every filter itself too: a server that ignores one (an older API) still
  // shows only matching rows.
  const keep = (job) => (!states.length || states.includes(job.state))
    && (!task || job.task === task)
    && (!idPrefix || job.job_id.startsWith(idPrefix))
    && (!pair || (job.labels || {})[pair[0]] === pair[1]);

  async function load() {
    if (workflowId) {
      const steps = (await workflowSteps(workflowId)).filter(keep);
      replace(results, table(STEP_HEADERS, steps.map(stepRow), "No steps match."));
      replace(pager);
      return;
    }
    // GET /jobs?schedule_id= lists a schedule's runs and takes no other filter: the page
    // applies state and task to them itself.
    const page = await api("GET", "/jobs", { query: {
      state: scheduleId ? undefined : states, task: scheduleId ? undefined : task,
      id_prefix: scheduleId ? undefined : idPrefix, label: scheduleId ? undefined : label,
      schedule_id: scheduleId, limit: pageSize(query), cursor: cursors[cursors.length - 1] || undefined } });
    const jobs = page.jobs.filter(keep);
    const next = page.next_cursor;
    replace(results, table(HEADERS, jobs.map(row), "No jobs match."));
    replace(pager,
      cursors.length > 1 ? button("← Newer", () => { cursors.pop(); load().catch(fail); }) : null,
      h("span", { class: "muted" }, `page ${cursors.length}`),
      next ? button("Older →", () => { cursors.push(next); load().catch(fail); }) : null);
  }
  const fail = (error) => notify(error.message, "error");
  await load();
  // Only the first page follows new jobs: a later one would shift under the reader.
  return { refresh: () => (cursors.length === 1 ? load() : Promise.resolve()), every: 5000 };
}

/** The options a job runs under, as one line: "concurrency acct-9 (limit 1) · unique ...". */
function flowText(flow) {
  const parts = [];
  if (flow.concurrency) parts.push(`concurrency ${flow.concurrency.key} (limit ${flow.concurrency.limit})`);
  if (flow.throttle) {
    const t = flow.throttle;
    parts.push(`throttle ${t.key} (${t.limit} per ${t.period_seconds} s, burst ${t.burst})`);
  }
  if (flow.unique) parts.push(`unique ${flow.unique.key}`);
  if (flow.debounce) parts.push(`debounce ${flow.debounce.key} (${flow.debounce.seconds} s)`);
  const line = h("span", { class: "flow" }, parts.join(" · "));
  if (flow.start_by) line.append(parts.length ? " · start by " : "start by ", when(flow.start_by));
  return line;
}

function facts(job) {
  const pairs = [
    ["state", badge(job.state)],
    ["task", job.task],
    ["pool / priority", `${job.pool} / ${job.priority}`],
    ["attempts", `${job.attempts} of ${job.max_attempts}`
      + (job.crash_recoveries ? ` (${job.crash_recoveries} crash recoveries)` : "")],
    ["created", when(job.created_at)],
    ["runs at", when(job.run_at)],
    ["started", when(job.started_at)],
    ["finished", when(job.finished_at)],
    ["due in", dueIn(job)],
    ["duration", duration(job)],
  ];
  if (job.state === "SLEEPING") {
    pairs.push(["sleeping", h("span", {}, `until `, when(job.sleeping_until), ` (${job.waiting})`)]);
  }
  if (job.waiting_for && (job.state !== "SLEEPING" || job.paused)) {
    // Why it has not started: a key's slot, a throttle, a pause (leasehold.flow).
    pairs.push(["waiting", h("span", { class: "waiting" }, job.waiting_for)]);
  }
  if (job.flow) pairs.push(["flow control", flowText(job.flow)]);
  if (job.idempotency_key) pairs.push(["idempotency key", job.idempotency_key]);
  if (Object.keys(job.labels || {}).length) {
    pairs.push(["labels", Object.entries(job.labels).map(([k, v]) => `${k}=${v}`).join(", ")]);
  }
  if (job.schedule_id) {
    pairs.push(["schedule", h("span", {}, link(`#/jobs?schedule=${job.schedule_id}`, job.schedule_id),
      job.scheduled_for ? " for " : "", job.scheduled_for ? when(job.scheduled_for) : "")]);
  }
  if (job.workflow_id) {
    pairs.push(["workflow", h("span", {}, link(`#/workflows/${job.workflow_id}`, job.workflow_id),
      ` step ${job.step_id || "?"}`)]);
  }
  if (job.parent_id) {
    // A durable child (ctx.spawn): its parent, and what the parent's end does to it.
    pairs.push(["parent", h("span", {}, link(`#/jobs/${job.parent_id}`, job.parent_id, { class: "mono" }),
      ` (on its end: ${job.on_parent_end})`)]);
  }
  if (job.code_version) {
    // The code version that first ran it; each attempt's is on its lease in the history.
    pairs.push(["code version", h("span", { class: "mono", "data-testid": "code-version" },
      job.code_version)]);
  }
  if (job.cancel_requested && !TERMINAL.has(job.state)) pairs.push(["cancel", "requested"]);
  return h("dl", { class: "facts" }, pairs.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function outcome(job) {
  if (job.error) {
    // A retried job keeps its last error until it finishes again.
    return panel(job.state === "DEAD" ? "Error" : "Last error",
      h("p", { class: "error-text", "data-testid": "job-error" },
        `${job.error.type}: ${job.error.message}`),
      job.error.traceback
        ? h("details", {}, h("summary", {}, "traceback"), h("pre", { class: "json" }, job.error.traceback))
        : null);
  }
  if (job.state === "SUCCEEDED") return panel("Result", json(job.result));
  return null;
}

/** The states POST /jobs/{id}/reset accepts (durable/reset.py); RUNNING answers 409. */
const RESETTABLE = new Set(["SUCCEEDED", "DEAD", "CANCELLED", "SLEEPING", "QUEUED"]);

// Reset from a step: its record and the later ones are dropped, and the job runs again
// (admitted like a retry). Asked first, as it re-does work.
function resetButton(job, step, redraw) {
  if (!RESETTABLE.has(job.state) || job.workflow_id) return null;
  return button("Reset from here", async () => {
    if (!await confirmAction(`Reset job ${job.job_id} from step ${step}?`,
      `Step ${step} and every later record are dropped, and the job runs again from there `
      + "(admitted like a retry). Earlier steps keep their results. Live children spawned "
      + "from that step on are cancelled and spawned again.", "Reset")) return;
    try {
      await api("POST", `/jobs/${job.job_id}/reset`, { body: { from_step: step } });
      notify(`Reset ${job.job_id} from step ${step}.`);
      await redraw();
    } catch (error) {
      notify(error.message, "error");
    }
  });
}

// A durable job's steps, sleeps and callbacks; an open callback can be completed here (for
// testing: the value is asked for as JSON); a step can be reset from.
function durable(job, steps, redraw) {
  if (!steps.length) return null;
  const complete = (token) => button("Complete callback", async () => {
    const text = window.prompt("The callback's value (JSON)", "{}");
    if (text === null) return;
    try {
      const done = await api("POST", `/callbacks/${token}`, { body: JSON.parse(text) });
      notify(done.changed ? "Callback completed." : `Already ${done.outcome}.`);
      await redraw();
    } catch (error) {
      notify(error.message, "error");
    }
  });
  return panel("Steps", table(["#", "kind", "name", "when", "result / until / outcome", ""],
    steps.map((s) => [s.seq === undefined ? "" : String(s.seq + 1), s.kind, s.name,
      when(new Date(s.at).toISOString()),
      s.kind === "step" ? json(s.result)
        : s.kind === "sleep" ? when(new Date(s.until).toISOString())
          : s.kind === "child" ? link(`#/jobs/${s.job_id}`, s.job_id, { class: "mono" })
            : s.kind === "patch" ? "patched"
              : (s.outcome || `open until ${new Date(s.timeout_at).toISOString()}`),
      s.token ? complete(s.token) : s.kind === "step" ? resetButton(job, s.name, redraw) : null])));
}

// A durable parent's children (ctx.spawn) with their states: the first 100 by name, as
// GET /jobs/{id} gives them. A child another live job answered for (a unique key's holder,
// a debounce window) is not the parent's own and is not cancelled with it.
function family(job) {
  if (!job.children || !job.children.length) return null;
  return panel("Children",
    table(["name", "job", "task", "state", "on parent end"],
      job.children.map((c) => [c.name, link(`#/jobs/${c.job_id}`, c.job_id, { class: "mono" }),
        c.task || "", c.state ? badge(c.state) : "gone", c.own ? c.on_parent_end : "not its own"])),
    job.more_children ? h("p", { class: "muted" }, `The first ${job.children.length}, by name.`) : null);
}

function timeline(history) {
  return h("ol", { class: "timeline" }, history.map((step) => h("li", {},
    when(step.at), " ",
    step.from ? [badge(step.from), " → "] : null, badge(step.to),
    h("span", { class: "muted" }, ` by ${step.by}`),
    step.reason ? h("span", { class: "reason" }, ` — ${step.reason}`) : null,
    step.code_version ? h("span", { class: "muted mono" }, ` on ${step.code_version}`) : null)));
}

export async function renderJob(main, jobId) {
  let last = null;
  async function draw() {
    const job = await api("GET", `/jobs/${jobId}`);
    const { steps } = await api("GET", `/jobs/${jobId}/steps`);
    last = job;
    const act = (label, method, path, done, ask) => button(label, async () => {
      if (ask && !await confirmAction(...ask)) return;
      try {
        await api(method, path);
        notify(done);
        await draw();
      } catch (error) {
        notify(error.message, "error");
      }
    });
    replace(main,
      h("h1", {}, "Job ", h("span", { class: "mono" }, job.job_id)),
      h("div", { class: "actions" },
        TERMINAL.has(job.state) ? null : act("Cancel", "DELETE", `/jobs/${jobId}`, `Cancelled ${jobId}.`,
          [`Cancel job ${jobId}?`, job.state === "RUNNING"
            ? "It is running: its worker stops it at the next heartbeat and it will not be retried."
            : "It will not run. Retry can queue it again later.", "Cancel job"]),
        ["DEAD", "CANCELLED"].includes(job.state)
          ? act("Retry", "POST", `/jobs/${jobId}/retry`, `Queued ${jobId} again.`) : null,
        // Pause one job: it does not start until resumed (a running one finishes its attempt).
        TERMINAL.has(job.state) ? null : job.paused
          ? act("Resume", "POST", `/jobs/${jobId}/resume`, `Resumed ${jobId}.`)
          : act("Pause", "POST", `/jobs/${jobId}/pause`, `Paused ${jobId}.`),
        link("#/jobs", "All jobs")),
      facts(job),
      h("div", { class: "columns" },
        panel("Payload", json(job.payload)),
        outcome(job)),
      job.progress !== null && job.progress !== undefined ? panel("Progress", json(job.progress)) : null,
      durable(job, steps.filter((s) => s.kind !== "child"), draw),
      family(job),
      panel("Timeline", waterfall(job, steps)),
      panel("History", timeline(job.history)));
    return job;
  }
  await draw();
  return {
    every: 2000,
    refresh: async () => {
      // A finished job changes only by Retry, which redraws it: until then, spare the API.
      if (!TERMINAL.has(last.state)) await draw();
    },
  };
}
