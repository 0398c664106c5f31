// Tasks: each task's succeeded and failed counts and its duration and queue-wait p50/p99
// over the last hour and day, and a queue-wait chart, all from GET /stats/tasks (stored
// per-minute and per-hour figures, not samples the page took).

import { api } from "./api.js";
import { h, link, panel, replace, span, table } from "./dom.js";
import { queueWaitChart } from "./chart.js";

function upTo(seconds) {
  return seconds === null || seconds === undefined ? "—" : `≤ ${span(seconds)}`;
}

function rate(w) {
  const total = w.succeeded + w.failed;
  return total ? `${((100 * w.failed) / total).toFixed(total < 100 ? 0 : 1)} %` : "—";
}

function cells(w) {
  return [String(w.succeeded), String(w.failed), rate(w), upTo(w.duration_p50),
    upTo(w.duration_p99), upTo(w.wait_p50), upTo(w.wait_p99)];
}

const COLUMNS = ["succeeded", "failed", "failure rate", "duration p50", "duration p99",
  "wait p50", "wait p99"];

export async function render(main) {
  const hour = h("div");
  const day = h("div");
  const chart = h("div", { class: "chart" });
  replace(main, h("h1", {}, "Tasks"),
    h("p", { class: "muted" }, "Jobs that ended (SUCCEEDED or DEAD) per task. Percentiles are "
      + "the upper bound of a fixed histogram bucket; the wait is from due to started."),
    panel("Queue wait", chart),
    panel("Last hour", hour),
    panel("Last day", day));

  async function load() {
    const figures = await api("GET", "/stats/tasks");
    const rows = (window) => figures.tasks.map((t) => [
      link(`#/jobs?task=${encodeURIComponent(t.task)}`, t.task), ...cells(t[window])]);
    replace(hour, table(["task", ...COLUMNS], rows("hour"), "No job ended in the last hour."));
    replace(day, table(["task", ...COLUMNS], rows("day"), "No job ended in the last day."));
    replace(chart, queueWaitChart(figures.queue_wait));
  }

  await load();
  return { refresh: load, every: 15000 };
}
