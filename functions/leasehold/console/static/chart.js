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
