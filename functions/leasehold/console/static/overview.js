// Overview: live jobs by state, finished by outcome, queues and dead letters, workers, and a
// throughput chart sampled from /stats (finished jobs per interval, as Sidekiq's live graph).

import { api, LIVE_STATES } from "./api.js";
import { badge, h, link, panel, replace, table } from "./dom.js";
import { workersTable } from "./workers.js";
import { queueWaitChart, throughputChart } from "./chart.js";

// Each /stats reads every queue's depth (and, on AWS, its age metric): every 5 s is live
// enough for a person and keeps an open tab cheap.
const EVERY_MS = 5000;
const KEEP = 60;
const LISTING_EVERY_MS = 30000;
const LISTED = 50;
/** Samples of the tenant's finished count, kept across page changes (reset with the tenant). */
let samples = [];

export function forget() {
  samples = [];
}

function finished(stats) {
  return Object.values(stats.jobs).reduce((sum, n) => sum + n, 0);
}

function intervals() {
  const out = [];
  for (let i = 1; i < samples.length; i++) {
    const [before, after] = [samples[i - 1], samples[i]];
    out.push({ at: after.at, seconds: (after.at - before.at) / 1000,
      jobs: Math.max(0, after.finished - before.finished) });
  }
  return out;
}

function liveByState(page) {
  const counts = Object.fromEntries(LIVE_STATES.map((state) => [state, 0]));
  for (const job of page.jobs) counts[job.state] += 1;
  return counts;
}

export async function render(main) {
  const cards = h("section", { class: "cards", "aria-label": "totals" });
  const live = h("div");
  const chart = h("div", { class: "chart" });
  const wait = h("div", { class: "chart" });
  const queues = h("div");
  const workers = h("div");
  replace(main,
    h("h1", {}, "Overview"),
    cards,
    h("div", { class: "columns" },
      panel("Live jobs by state", live),
      panel("Throughput", chart)),
    panel("Queue wait", wait, h("p", {}, link("#/tasks", "Per task →"))),
    panel("Queues", queues),
    panel("Workers", workers));

  // Live jobs by state come from a listing, which may read several index pages of a busy
  // tenant's history (the tenant counters keep only a live total): sample it less often.
  let page = null;
  let listedAt = 0;

  async function refresh() {
    const due = Date.now() - listedAt >= LISTING_EVERY_MS;
    const listing = due ? api("GET", "/jobs", { query: { state: LIVE_STATES, limit: LISTED } }) : null;
    // The queue wait comes from stored per-minute figures (the hour before the page opened
    // too), read as rarely as the listing.
    const figures = due ? api("GET", "/stats/tasks") : null;
    const [stats, fleet, listed, read] = await Promise.all([
      api("GET", "/stats"), api("GET", "/workers"), listing, figures]);
    if (read) replace(wait, queueWaitChart(read.queue_wait));
    if (listed) {
      page = listed;
      listedAt = Date.now();
    }
    const now = Date.now();
    samples.push({ at: now, finished: finished(stats) });
    samples = samples.slice(-KEEP - 1);
    const dlq = stats.queues.reduce((sum, q) => sum + q.dead_letters, 0);
    const card = (label, value, href, says, cls = "") => h("a", { class: `card ${cls}`, href, title: says },
      h("span", { class: "value" }, String(value)), h("span", { class: "label" }, label),
      h("span", { class: "says" }, says));
    const counts = liveByState(page);
    const listedLive = Object.values(counts).reduce((sum, n) => sum + n, 0);
    const more = Boolean(page.next_cursor);
    // One number for "live jobs" on the page: the by-state table's sum. The tenant's
    // admission counter (stats.live) counts only jobs the API admitted against the live-job
    // limit (not schedule, trigger or workflow runs), so it gets its own card and name.
    replace(cards,
      card("live jobs", `${listedLive}${more ? "+" : ""}`, "#/jobs?state=QUEUED&state=RUNNING&state=SCHEDULED&state=WAITING",
        "scheduled, waiting, queued and running: the sum of the table below"),
      card("admitted, counted against your limit", stats.live, "#/jobs?state=QUEUED&state=RUNNING&state=SCHEDULED&state=WAITING",
        "live jobs submitted through the API (or retried), which the live-job limit counts; schedule, trigger and workflow runs are not among them"),
      card("succeeded", stats.jobs.SUCCEEDED || 0, "#/jobs?state=SUCCEEDED", "finished jobs that succeeded, all time", "ok"),
      card("dead", stats.jobs.DEAD || 0, "#/dead-letters", "jobs that ran out of attempts, all time", stats.jobs.DEAD ? "bad" : ""),
      card("cancelled", stats.jobs.CANCELLED || 0, "#/jobs?state=CANCELLED", "cancelled jobs, all time"),
      card("in dead-letter queues", dlq, "#/dead-letters", "messages in the pools' dead-letter queues (every tenant's)", dlq ? "bad" : ""),
      card("workers", fleet.workers.length, "#/workers", "worker processes with a recent heartbeat"));
    replace(live,
      table(["state", "jobs"], LIVE_STATES.map((state) => [
        badge(state), link(`#/jobs?state=${state}`, String(counts[state]))])),
      h("p", { class: "muted" }, more
        ? `Among your newest ${page.jobs.length} live jobs (there are more); every 30 s.`
        : "Every live job, counted every 30 s."));
    replace(chart, throughputChart(intervals(), EVERY_MS / 1000));
    replace(queues, table(
      ["pool", "priority", "waiting", "delayed", "in flight", "dead letters", "oldest"],
      stats.queues.map((q) => [q.pool, q.priority, q.visible, q.delayed, q.in_flight,
        q.dead_letters ? h("a", { href: "#/dead-letters", class: "bad" }, String(q.dead_letters)) : "0",
        q.oldest_age_seconds === null ? "—" : `${Math.round(q.oldest_age_seconds)} s`])));
    replace(workers, workersTable(fleet.workers, now));
  }

  await refresh();
  return { refresh, every: EVERY_MS };
}
