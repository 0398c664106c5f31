// A workflow's graph as SVG: steps in columns by depth (a step sits right of everything it
// depends on), edges from each dependency, each step coloured by its state.

import { h } from "./dom.js";

const NODE_W = 168;
const NODE_H = 46;
const GAP_X = 64;
const GAP_Y = 18;
const PAD = 12;

/** Column of each step: 0 for roots, else one past its deepest dependency. */
export function depths(steps) {
  const byId = new Map(steps.map((s) => [s.id, s]));
  const depth = new Map();
  const visit = (id, seen = new Set()) => {
    if (depth.has(id)) return depth.get(id);
    if (seen.has(id)) return 0; // the API refuses cycles; never loop on bad data anyway
    seen.add(id);
    const deps = (byId.get(id)?.depends_on || []).filter((d) => byId.has(d));
    const d = deps.length ? 1 + Math.max(...deps.map((dep) => visit(dep, seen))) : 0;
    depth.set(id, d);
    return d;
  };
  for (const s of steps) visit(s.id);
  return depth;
}

export function drawGraph(steps, onPick) {
  const depth = depths(steps);
  const columns = [];
  for (const s of steps) (columns[depth.get(s.id)] ||= []).push(s);
  const place = new Map();
  columns.forEach((column, x) => column.forEach((s, y) => place.set(s.id, {
    x: PAD + x * (NODE_W + GAP_X), y: PAD + y * (NODE_H + GAP_Y) })));
  const width = PAD * 2 + columns.length * NODE_W + (columns.length - 1) * GAP_X;
  const rows = Math.max(...columns.map((c) => c.length));
  const height = PAD * 2 + rows * NODE_H + (rows - 1) * GAP_Y;
  const edges = steps.flatMap((s) => (s.depends_on || []).filter((d) => place.has(d)).map((d) => {
    const from = place.get(d);
    const to = place.get(s.id);
    const [x1, y1, x2, y2] = [from.x + NODE_W, from.y + NODE_H / 2, to.x, to.y + NODE_H / 2];
    const bend = (x2 - x1) / 2;
    return h("svg:path", { class: "edge", "marker-end": "url(#arrow)",
      d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2 - 2},${y2}` });
  }));
  const nodes = steps.map((s) => {
    const { x, y } = place.get(s.id);
    const pick = () => onPick(s);
    return h("svg:g", { class: `step state-${s.state}`, transform: `translate(${x},${y})`,
      tabindex: 0, role: "link", "data-step": s.id, "aria-label": `step ${s.id}: ${s.state}`,
      onclick: pick, onkeydown: (e) => { if (e.key === "Enter") pick(); } },
    h("svg:title", {}, `${s.id} (${s.task}): ${s.state}${s.error ? ` — ${s.error.message}` : ""}`),
    h("svg:rect", { width: NODE_W, height: NODE_H, rx: 6 }),
    h("svg:text", { x: 10, y: 19, class: "name" }, s.id.length > 20 ? `${s.id.slice(0, 19)}…` : s.id),
    h("svg:text", { x: 10, y: 36, class: "state" }, `${s.state} · ${s.task}`.slice(0, 26)));
  });
  return h("svg:svg", { class: "dag", viewBox: `0 0 ${width} ${height}`, width, height,
    role: "group", "aria-label": "workflow graph" },
  h("svg:defs", {}, h("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
  h("svg:path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }))),
  edges, nodes);
}
