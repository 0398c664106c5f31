// Schedules: cron and zone, the next fire times in the schedule's zone and in UTC, the last
// run, Pause / Resume / Trigger, and create, edit (PATCH) and delete.

import { api } from "./api.js";
import { badge, button, confirmAction, h, link, notify, panel, replace, table, when } from "./dom.js";
import { choice, field, parseJson, PRIORITIES, values } from "./forms.js";

const MISFIRE = [["", "default"], ["skip", "skip"], ["fire_once", "fire once"], ["catch_up", "catch up"]];

/**
 * The create form, or the edit form of ``s`` (PATCH sends only what the form holds: a
 * workflow schedule's steps are kept as they are).
 */
function scheduleForm(s, done) {
  const zone = s ? s.timezone : Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const form = h("form", { class: "filters", "aria-label": s ? `edit ${s.name}` : "new schedule" },
    field("Name", { name: "name", value: s ? s.name : "", placeholder: "nightly report" }),
    field("Cron", { name: "cron", value: s ? s.cron : "", placeholder: "30 2 * * *", required: true }),
    field("Time zone", { name: "timezone", value: zone, placeholder: "Europe/London" }),
    s && s.workflow ? null : [
      field("Task", { name: "task", value: s ? s.task : "", placeholder: "e.g. echo", required: true }),
      field("Payload (JSON)", { name: "payload", rows: 1,
        value: s && s.payload !== null && s.payload !== undefined ? JSON.stringify(s.payload) : "" }),
      field("Pool", { name: "pool", value: s ? s.pool : "", placeholder: "default" }),
      choice("Priority", "priority", PRIORITIES, s ? s.priority : "")],
    choice("Misfires", "misfire_policy", MISFIRE, s ? s.misfire_policy : ""),
    h("button", { type: "submit" }, s ? "Save changes" : "Create schedule"),
    s ? button("Close", () => done(null)) : null);
  // textarea has no value attribute: set it as a property.
  const payload = form.querySelector("textarea[name=payload]");
  if (payload && s && s.payload !== null && s.payload !== undefined) payload.value = JSON.stringify(s.payload);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const body = values(form);
      if ("payload" in body) body.payload = parseJson(body.payload, "the payload");
      const saved = s
        ? await api("PATCH", `/schedules/${s.schedule_id}`, { body })
        : await api("POST", "/schedules", { body });
      notify(`${s ? "Saved" : "Created"} schedule ${saved.name} (${saved.schedule_id}).`);
      if (!s) form.reset();
      await done(saved);
    } catch (error) {
      notify(error.message, "error");
    }
  });
  return form;
}

/** A time as the wall clock of ``zone`` shows it (what the cron expression means). */
export function inZone(iso, zone) {
  try {
    return new Intl.DateTimeFormat("en-GB", { timeZone: zone, dateStyle: "medium",
      timeStyle: "medium" }).format(new Date(iso));
  } catch {
    return iso;
  }
}

function utc(iso) {
  return iso.replace("T", " ").replace(/\.\d+/, "").replace(/(Z|\+00:00)$/, " UTC");
}

function fireTime(iso, zone) {
  if (!iso) return h("span", { class: "muted" }, "—");
  return h("span", { class: "fire" }, h("span", {}, `${inZone(iso, zone)} ${zone}`),
    h("br"), h("span", { class: "muted" }, utc(iso)));
}

function lastRun(s) {
  if (!s.last_fired_at) return h("span", { class: "muted" }, "never");
  return h("span", {}, when(s.last_fired_at), ` (${s.run_count} runs) `,
    s.last_workflow_id ? link(`#/workflows/${s.last_workflow_id}`, "workflow")
      : s.last_job_id ? link(`#/jobs/${s.last_job_id}`, "job") : null);
}

function what(s) {
  if (s.workflow) return `workflow (${s.workflow.steps.length} steps)`;
  return s.task;
}

export async function render(main) {
  const list = h("div");
  const detail = h("div");
  const editor = h("div");
  let editing = null;
  replace(main, h("h1", {}, "Schedules"), list, editor, detail,
    panel("New schedule", scheduleForm(null, () => reload())));
  const schedules = [];
  let cursor = null;
  let open = null; // the schedule whose next fire times are shown

  async function act(s, action) {
    if (action === "pause" && !await confirmAction(`Pause schedule ${s.name}?`,
      "It stops firing until resumed, and its runs queued ahead of their time are withdrawn. "
      + "Runs already started go on.", "Pause schedule")) return;
    try {
      const answer = await api("POST", `/schedules/${s.schedule_id}/${action}`);
      if (action === "trigger") {
        const id = answer.workflow_id || answer.job_id;
        notify(h("span", {}, `Triggered ${s.name}: `,
          link(answer.workflow_id ? `#/workflows/${id}` : `#/jobs/${id}`, id)));
      } else {
        notify(`${action === "pause" ? "Paused" : "Resumed"} ${s.name}.`);
      }
      await reload();
    } catch (error) {
      notify(error.message, "error");
    }
  }

  async function remove(s) {
    if (!await confirmAction(`Delete schedule ${s.name}?`,
      "It will never fire again and cannot be restored. Jobs it already started stay.",
      "Delete schedule")) return;
    try {
      await api("DELETE", `/schedules/${s.schedule_id}`);
      notify(`Deleted schedule ${s.name}.`);
      if (editing === s.schedule_id) closeEditor();
      await reload();
    } catch (error) {
      notify(error.message, "error");
    }
  }

  function closeEditor() {
    editing = null;
    replace(editor);
  }

  function edit(s) {
    editing = s.schedule_id;
    replace(editor, panel(`Edit ${s.name}`, scheduleForm(s, async (saved) => {
      closeEditor();
      if (saved) await reload();
    })));
    editor.scrollIntoView({ block: "nearest" });
  }

  async function showNext(s) {
    open = s.schedule_id;
    const next = await api("GET", `/schedules/${s.schedule_id}/next`, { query: { count: 5 } });
    replace(detail, h("section", { class: "panel", "aria-label": "next fire times" },
      h("h2", {}, `Next fire times of ${s.name}`),
      h("p", { class: "muted" }, `${s.cron} in ${s.timezone}`),
      table([`${s.timezone}`, "UTC"], next.times.map((t) => [inZone(t, s.timezone), utc(t)]),
        "No more fire times (ended or paused).")));
  }

  function draw() {
    replace(list, table(
      ["name", "cron", "zone", "fires", "state", "next fire", "last run", ""],
      schedules.map((s) => [
        h("span", {}, h("strong", {}, s.name), h("br"),
          h("span", { class: "muted mono" }, s.schedule_id)),
        h("code", {}, s.cron), s.timezone, what(s),
        s.last_error ? h("span", {}, badge(s.state), h("br"),
          h("span", { class: "muted", title: `next try ${s.retry_at}` },
            `failing (${s.failures}): ${s.last_error}`)) : badge(s.state),
        fireTime(s.next_fire_at, s.timezone), lastRun(s),
        h("span", { class: "actions" },
          s.state === "PAUSED" ? button("Resume", () => act(s, "resume"))
            : button("Pause", () => act(s, "pause"), { disabled: s.state !== "ACTIVE" }),
          button("Trigger", () => act(s, "trigger")),
          button("Edit", () => edit(s)),
          button("Delete", () => remove(s)),
          button("Next times", () => showNext(s).catch((e) => notify(e.message, "error"))),
          link(`#/jobs?schedule=${s.schedule_id}`, "runs")),
      ]),
      "No schedules. Create one below, with `leasehold schedules create` or POST /schedules."),
    cursor ? button("More schedules", () => more().catch((e) => notify(e.message, "error"))) : null);
  }

  async function more() {
    const page = await api("GET", "/schedules", { query: { limit: 50, cursor: cursor || undefined } });
    schedules.push(...page.schedules);
    cursor = page.next_cursor;
    draw();
  }

  async function reload() {
    const count = Math.max(50, schedules.length);
    const page = await api("GET", "/schedules", { query: { limit: Math.min(200, count) } });
    schedules.splice(0, schedules.length, ...page.schedules);
    cursor = page.next_cursor;
    draw();
    const shown = schedules.find((s) => s.schedule_id === open);
    if (shown) await showNext(shown);
  }

  await reload();
  return { refresh: reload, every: 5000 };
}
