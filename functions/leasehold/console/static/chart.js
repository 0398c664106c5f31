// The throughput chart: one bar per sampling interval, as an SVG the page draws itself.

import { h } from "./dom.js";

const WIDTH = 480;
const HEIGHT = 140;
const PAD = 28;
const SLOTS = 60;

export function throughputChart(points, seconds) {
  if (!points.length) {
    return h("p", { class: "muted" }, `Sampling /stats every ${seconds} s…`);
  }
  const top = Math.max(1, ...points.map((p) => p.jobs));
  const slot = (WIDTH - PAD) / SLOTS;
  const last = points[points.length - 1];
  const minute = points.filter((p) => p.at > last.at - 60000).reduce((s, p) => s + p.jobs, 0);
  const bars = points.slice(-SLOTS).map((p, i, shown) => {
    const height = (p.jobs / top) * (HEIGHT - PAD);
    const x = PAD + (SLOTS - shown.length + i) * slot;
    return h("svg:rect", { class: "bar", x: x + 1, y: HEIGHT - PAD - height,
      width: Math.max(1, slot - 2), height },
    h("svg:title", {}, `${p.jobs} finished in ${p.seconds.toFixed(1)} s`));
  });
  return h("figure", {},
    h("svg:svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", class: "throughput",
      "aria-label": `jobs finished per ${seconds} s` },
    h("svg:line", { class: "axis", x1: PAD, y1: HEIGHT - PAD, x2: WIDTH, y2: HEIGHT - PAD }),
    h("svg:line", { class: "axis", x1: PAD, y1: 0, x2: PAD, y2: HEIGHT - PAD }),
    h("svg:text", { x: PAD - 4, y: 10, class: "tick", "text-anchor": "end" }, String(top)),
    h("svg:text", { x: PAD - 4, y: HEIGHT - PAD, class: "tick", "text-anchor": "end" }, "0"),
    h("svg:text", { x: WIDTH, y: HEIGHT - 8, class: "tick", "text-anchor": "end" }, "now"),
    bars),
    h("figcaption", {}, `${minute} jobs finished in the last minute (bars: per ${seconds} s)`));
}

/**
 * Queue wait per minute over the last hour, from the stored per-task figures (GET
 * /stats/tasks): p99 as a light bar, p50 as a dark one, on a log scale of seconds.
 */
export function queueWaitChart(points) {
  const busy = points.filter((p) => p.jobs);
  if (!busy.length) return h("p", { class: "muted" }, "No job finished in the last hour.");
  const top = Math.max(1, ...busy.map((p) => p.wait_p99 || 0));
  const scale = (s) => (Math.log10(1 + (s || 0) * 10) / Math.log10(1 + top * 10)) * (HEIGHT - PAD);
  const slot = (WIDTH - PAD) / points.length;
  const bars = points.map((p, i) => {
    const x = PAD + i * slot;
    if (!p.jobs) return null;
    const tip = `${new Date(p.minute * 1000).toLocaleTimeString()}: ${p.jobs} jobs, `
      + `wait p50 ≤ ${p.wait_p50} s, p99 ≤ ${p.wait_p99} s`;
    return h("svg:g", { class: "minute" },
      h("svg:rect", { class: "bar p99", x: x + 1, y: HEIGHT - PAD - scale(p.wait_p99),
        width: Math.max(1, slot - 2), height: scale(p.wait_p99) }),
      h("svg:rect", { class: "bar p50", x: x + 1, y: HEIGHT - PAD - scale(p.wait_p50),
        width: Math.max(1, slot - 2), height: scale(p.wait_p50) }),
      h("svg:title", {}, tip));
  });
  return h("figure", {},
    h("svg:svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", class: "throughput wait",
      "aria-label": "queue wait per minute, last hour" },
    h("svg:line", { class: "axis", x1: PAD, y1: HEIGHT - PAD, x2: WIDTH, y2: HEIGHT - PAD }),
    h("svg:line", { class: "axis", x1: PAD, y1: 0, x2: PAD, y2: HEIGHT - PAD }),
    h("svg:text", { x: PAD - 4, y: 10, class: "tick", "text-anchor": "end" }, `${top}s`),
    h("svg:text", { x: PAD - 4, y: HEIGHT - PAD, class: "tick", "text-anchor": "end" }, "0"),
    h("svg:text", { x: PAD, y: HEIGHT - 8, class: "tick" }, "−60 min"),
    h("svg:text", { x: WIDTH, y: HEIGHT - 8, class: "tick", "text-anchor": "end" }, "now"),
    bars),
    h("figcaption", {}, "Queue wait (due to started) per minute, last hour: p50 dark, p99 light; "
      + "from stored figures, so it covers the hour before the page opened too."));
}
