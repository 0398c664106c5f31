// Schedules: cron and zone, the next fire times in the schedule's zone and in UTC, the last
// run, and Pause / Resume / Trigger.

import { api } from "./api.js";
import { badge, button, h, link, notify, replace, table, when } from "./dom.js";

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
  replace(main, h("h1", {}, "Schedules"), list, detail);
  const schedules = [];
  let cursor = null;
  let open = null; // the schedule whose next fire times are shown

  async function act(s, action) {
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
        h("code", {}, s.cron), s.timezone, what(s), badge(s.state),
        fireTime(s.next_fire_at, s.timezone), lastRun(s),
        h("span", { class: "actions" },
          s.state === "PAUSED" ? button("Resume", () => act(s, "resume"))
            : button("Pause", () => act(s, "pause"), { disabled: s.state !== "ACTIVE" }),
          button("Trigger", () => act(s, "trigger")),
          button("Next times", () => showNext(s).catch((e) => notify(e.message, "error"))),
          link(`#/jobs?schedule=${s.schedule_id}`, "runs")),
      ]),
      "No schedules. Create one with `leasehold schedules create` or POST /schedules."),
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
