// A job's timeline as a waterfall, drawn from its own history and steps (no collector):
// queue wait, each attempt, backoffs, sleeps and waits, steps, children.

import { h } from "./dom.js";

const ms = (at) => new Date(at).getTime();

/** What each stretch of the job's life was, from its history (pure: tested in the page). */
export function segments(job, steps, now = Date.now()) {
  const history = job.history || [];
  const out = [];
  let attempt = 0;
  let ran = false;
  history.forEach((change, i) => {
    const start = ms(change.at);
    const end = i + 1 < history.length ? ms(history[i + 1].at)
      : (["SUCCEEDED", "DEAD", "CANCELLED", "EXPIRED"].includes(change.to) ? start : now);
    let kind = null;
    let label = "";
    if (change.to === "RUNNING") {
      attempt += 1;
      ran = true;
      kind = "attempt";
      label = `attempt ${attempt}`;
    } else if (change.to === "QUEUED" && change.from === "RUNNING") {
      kind = "backoff"; // a retry's delay (or a lease the sweeper took back), then the queue
      label = "retry backoff";
    } else if (change.to === "QUEUED") {
      kind = "queue";
      label = "queue wait";
    } else if (change.to === "SCHEDULED") {
      kind = ran ? "backoff" : "delay";
      label = ran ? "retry backoff" : "scheduled";
    } else if (change.to === "SLEEPING") {
      kind = "sleep";
      label = (change.reason || "asleep").replace(/^suspended: /, "");
    } else if (change.to === "WAITING") {
      kind = "wait";
      label = "waiting for dependencies";
    } else {
      kind = "end";
      label = change.to;
    }
    out.push({ kind, label, start, end: Math.max(end, start) });
  });
  for (const record of steps || []) {
    const at = ms(record.at);
    if (record.kind === "step") out.push({ kind: "step", label: `step ${record.name}`, start: at, end: at });
    if (record.kind === "sleep") out.push({ kind: "sleep", label: "ctx.sleep", start: at, end: ms(record.until) });
    if (record.kind === "callback") {
      const settled = record.settled_at ? ms(record.settled_at) : ms(record.timeout_at);
      out.push({ kind: "wait", label: `callback ${record.name}`, start: at, end: Math.min(settled, now) });
    }
    if (record.kind === "child") out.push({ kind: "child", label: `child ${record.name}`, start: at, end: at });
  }
  return out;
}

function seconds(value) {
  return value >= 1000 ? `${(value / 1000).toFixed(value >= 10000 ? 0 : 1)} s` : `${value} ms`;
}

/** The waterfall: one row per segment, bars placed on the job's own time axis. */
export function waterfall(job, steps, now = Date.now()) {
  const rows = segments(job, steps, now);
  if (!rows.length) return null;
  const first = Math.min(...rows.map((r) => r.start));
  const last = Math.max(...rows.map((r) => r.end), first + 1);
  const span = last - first;
  return h("div", { class: "waterfall", role: "list" }, rows.map((row) => {
    const left = ((row.start - first) / span) * 100;
    const width = Math.max(((row.end - row.start) / span) * 100, 0.5);
    // Placed through the CSSOM: the console's CSP refuses style attributes.
    const bar = h("span", { class: "wf-bar" });
    bar.style.left = `${left.toFixed(2)}%`;
    bar.style.width = `${width.toFixed(2)}%`;
    return h("div", { class: `wf-row wf-${row.kind}`, role: "listitem", "data-kind": row.kind },
      h("span", { class: "wf-label" }, row.label),
      h("span", { class: "wf-track" }, bar),
      h("span", { class: "wf-time muted" }, row.end > row.start ? seconds(row.end - row.start) : ""));
  }));
}
