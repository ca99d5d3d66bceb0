// A project's traffic over time (#/projects/NAME?range=24h): traces and errors, latency
// p50/p99, tokens and cost, runs by run type and cost by model, each figure computed by
// the service in SQL (POST /runs/charts) and drawn with uPlot, a small charting library
// vendored in viewer/vendor/ (MIT; nothing is fetched from elsewhere). Times on the axes and in
// the legends are the 24-hour clock every other page uses (dom.js); a value with no value beside
// it (a single bucket with traces) is drawn as a point, so a chart is never an empty plot.

import uPlot from "./vendor/uPlot.esm.js";
import { api } from "./api.js";
import { cut, fmtClock, fmtCost, fmtDuration, fmtInt, fmtTime, h, parseTime, replace } from "./dom.js";

const RANGES = [["1h", "last hour", 3_600_000], ["24h", "last 24 h", 86_400_000], ["7d", "last 7 days", 7 * 86_400_000], ["30d", "last 30 days", 30 * 86_400_000]];
const COLORS = ["#3451b2", "#c62828", "#1a7f37", "#9a6700", "#7b1fa2", "#00695c", "#a85100", "#1565c0", "#455a64", "#ad1457", "#2e7d32", "#6a1b9a", "#37474f"];
const HEIGHT = 190;

function projectLabel(project) {
  return project.name || project.id;
}

function seconds(times) {
  return times.map((t) => parseTime(t) / 1000);
}

function sum(values) {
  return values.reduce((a, v) => a + (Number(v) || 0), 0);
}

export class ProjectView {
  constructor(app, projectKey, params) {
    this.app = app;
    this.projectKey = projectKey;
    this.range = RANGES.some(([key]) => key === params.get("range")) ? params.get("range") : "24h";
    this.closed = false;
    this.plots = [];
    this.select = h("select", { id: "range", "aria-label": "range" }, RANGES.map(([key, label]) => h("option", { value: key }, label)));
    this.select.value = this.range;
    this.select.addEventListener("change", () => {
      this.range = this.select.value;
      history.replaceState(null, "", `#/projects/${encodeURIComponent(this.projectKey)}?range=${this.range}`);
      this.load().catch((error) => this.app.failed(error));
    });
    this.facts = h("div", { class: "facts" });
    this.grid = h("div", { class: "charts" });
    this.tables = h("div", { class: "chart-tables" });
    this.element = h(
      "section",
      { class: "project-view" },
      h("div", { class: "tracehead" }, h("h1", null, "Project ", h("span", { class: "project-name" }, cut(projectKey, 200))),
        h("div", { class: "filters" }, h("label", { for: "range" }, "Range"), this.select,
          h("a", { href: `#/?project=${encodeURIComponent(projectKey)}`, class: "tab" }, "Traces"),
          h("a", { href: `#/threads?project=${encodeURIComponent(projectKey)}`, class: "tab" }, "Threads")),
        this.facts),
      this.grid,
      this.tables,
    );
  }

  close() {
    this.closed = true;
    for (const plot of this.plots) plot.destroy();
    this.plots = [];
  }

  async open() {
    this.app.setCrumbs(h("a", { href: "#/" }, "Traces"), h("span", null, `Charts of ${cut(this.projectKey, 80)}`));
    try {
      await this.load();
    } catch (error) {
      this.app.failed(error);
    }
  }

  project() {
    return (this.app.projects || []).find((p) => projectLabel(p) === this.projectKey || p.id === this.projectKey);
  }

  async load() {
    const project = this.project();
    if (!project) {
      replace(this.grid, h("p", { class: "empty" }, `No project named ${cut(this.projectKey, 100)}.`));
      return;
    }
    const span = RANGES.find(([key]) => key === this.range)[2];
    const end = Date.now();
    const answer = await api.charts({ session: [project.id], start_time: new Date(end - span).toISOString(), end_time: new Date(end).toISOString() });
    if (this.closed) return;
    this.draw(answer);
  }

  draw(answer) {
    for (const plot of this.plots) plot.destroy();
    this.plots = [];
    const xs = seconds(answer.times || []);
    const s = answer.series || {};
    const totals = answer.totals || {};
    replace(
      this.facts,
      fact("bucket", answer.bucket),
      fact("traces", fmtInt(totals.traces || 0)),
      fact("runs", fmtInt(totals.runs || 0)),
      fact("traces with errors", fmtInt(totals.failed_traces || 0), "traces whose root run ended with an error"),
      fact("runs with errors", fmtInt(totals.errors || 0), "runs that ended with an error, a tool's inside a trace that went on included"),
      fact("tokens", fmtInt(totals.tokens || 0)),
      fact("cost", totals.cost === null || totals.cost === undefined ? (totals.unpriced ? "no price" : "none") : fmtCost(totals.cost)),
      totals.unpriced ? fact("without a price", `${fmtInt(totals.unpriced)} model run${totals.unpriced === 1 ? "" : "s"}`) : null,
    );
    const byType = answer.by_run_type || {};
    const byModel = answer.by_model || {};
    const charts = [
      ["traces", "Traces, and traces with errors", [["traces", s.traces], ["traces with errors", s.errors]], fmtInt, true],
      ["latency", "Trace latency p50 / p99", [["p50", s.latency_p50], ["p99", s.latency_p99]], (v) => fmtDuration(v * 1000), false],
      ["tokens", "Tokens", [["tokens", s.tokens]], fmtInt, true],
      ["cost", "Cost (USD)", [["cost", s.cost]], fmtCost, true],
      ["run-types", "Runs by run type", Object.entries(byType).map(([k, v]) => [k, v.runs]), fmtInt, false],
      ["models", "Tokens by model", Object.entries(byModel).map(([k, v]) => [k, v.tokens]), fmtInt, false],
    ];
    const step = BUCKET_S[answer.bucket] || 3600;
    replace(this.grid, charts.map(([id, title, series, fmt, bars]) => this.chart(id, title, xs, series, fmt, bars, step)));
    replace(this.tables, modelTable(byModel), typeTable(byType));
  }

  chart(id, title, xs, series, fmt, bars, step) {
    const holder = h("div", { class: "chart-plot" });
    const box = h("figure", { class: "chart", "data-chart": id }, h("figcaption", null, title), holder);
    const values = series.map(([, v]) => v || []);
    box.dataset.points = String(values.reduce((n, v) => n + v.filter((x) => x !== null && x !== undefined && x !== 0).length, 0));
    box.dataset.sum = String(values.length ? sum(values[0]) : 0);
    if (!series.length || !xs.length) {
      holder.appendChild(h("p", { class: "empty" }, "nothing in this range"));
      return box;
    }
    const width = Math.max(320, Math.floor((this.grid.clientWidth || 1200) / 2) - 32);
    // Days on the axis once the range passes one; the legend says the bucket's start in full.
    const days = step >= 86_400 || xs[xs.length - 1] - xs[0] > 86_400;
    const opts = {
      width,
      height: HEIGHT,
      cursor: { drag: { x: false, y: false } },
      // A range of one bucket is drawn a bucket wide, not as a line of no width.
      scales: { x: { time: true, range: (u, min, max) => (min === max ? [min - step / 2, max + step / 2] : [min, max]) } },
      axes: [
        { values: (u, ticks) => ticks.map((t) => (days && step >= 86_400 ? fmtClock(t * 1000, true).slice(0, 5) : fmtClock(t * 1000, days))), size: 40 },
        // Counts have whole ticks only (a tick of 0.5 runs would read as "1").
        { values: (u, ticks) => ticks.map((t) => (fmt === fmtInt && !Number.isInteger(t) ? "" : fmt(t))), size: fmt === fmtCost ? 84 : 70 },
      ],
      series: [
        { value: (u, v) => (v === null || v === undefined ? "–" : fmtTime(v * 1000).slice(0, 16)) },
        ...series.map(([label], i) => ({
          label: cut(label, 60),
          stroke: COLORS[i % COLORS.length],
          fill: bars ? `${COLORS[i % COLORS.length]}33` : undefined,
          width: bars ? 1 : 2,
          value: (u, v) => (v === null || v === undefined ? "–" : fmt(v)),
          paths: bars ? uPlot.paths.bars({ size: [0.7 / series.length, 40], align: 0 }) : undefined,
          spanGaps: !bars,
          // A line through one value is no line: such a value gets a point.
          points: bars ? undefined : { show: false, size: 7, fill: COLORS[i % COLORS.length], filter: alone },
        })),
      ],
    };
    // Drawn once the figure is in the page (uPlot measures its target).
    requestAnimationFrame(() => {
      if (this.closed) return;
      this.plots.push(new uPlot(opts, [xs, ...values], holder));
      box.dataset.drawn = "true";
    });
    return box;
  }
}

function fact(label, value, title) {
  return h("span", { class: "fact", title }, h("span", { class: "label" }, label), h("span", { class: "value" }, value));
}

const BUCKET_S = { minute: 60, hour: 3600, day: 86_400 };

// The indices of a series' values with no value on either side (uPlot's points.filter): null when none.
function alone(u, seriesIndex) {
  const values = u.data[seriesIndex];
  const found = [];
  for (let i = 0; i < values.length; i += 1) {
    const has = (j) => j >= 0 && j < values.length && values[j] !== null && values[j] !== undefined;
    if (has(i) && !has(i - 1) && !has(i + 1)) found.push(i);
  }
  return found.length ? found : null;
}

function modelTable(byModel) {
  const rows = Object.entries(byModel).map(([model, v]) =>
    h("tr", null, h("td", null, cut(model, 100)), h("td", { class: "col-runs" }, fmtInt(sum(v.runs))),
      h("td", { class: "col-tokens" }, fmtInt(sum(v.tokens))),
      h("td", { class: "col-cost" }, v.cost.some((c) => c !== null) ? fmtCost(sum(v.cost)) : "no price")),
  );
  return h("table", { class: "traces by-model" }, h("thead", null, h("tr", null, ["Model", "Runs", "Tokens", "Cost"].map((t) => h("th", null, t)))), h("tbody", null, rows));
}

function typeTable(byType) {
  const rows = Object.entries(byType).map(([kind, v]) =>
    h("tr", null, h("td", null, cut(kind, 60)), h("td", { class: "col-runs" }, fmtInt(sum(v.runs))), h("td", { class: "col-runs" }, fmtInt(sum(v.errors)))),
  );
  return h("table", { class: "traces by-type" }, h("thead", null, h("tr", null, ["Run type", "Runs", "Errors"].map((t) => h("th", null, t)))), h("tbody", null, rows));
}
