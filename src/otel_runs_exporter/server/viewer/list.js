// The traces of one project, newest first: root runs from POST /runs/query (narrowed by
// the filters of filters.js), each trace's run count and tokens from POST /runs/stats.
// Each row shows what the trace was asked and what it answered (the service's one-line
// preview of its root: the last user message and the reply for a chat), so traces of
// the same name are told apart at a glance.

import { api } from "./api.js";
import { Filters } from "./filters.js";
import { cut, fmtCost, fmtDuration, fmtInt, fmtTime, h, isUuid, link, parseTime, replace, statusBadge, statusOf } from "./dom.js";

const PAGE = 50;
const ROOT_FIELDS = ["name", "run_type", "start_time", "end_time", "status", "trace_id", "preview"];
// Counts of traces fetched at once when the list first shows; later ones come one per poll.
const FIRST_STATS = 3;

function projectLabel(project) {
  return project.name || project.id;
}

export class ListView {
  constructor(app, params) {
    this.app = app;
    this.projectKey = params.get("project") || "";
    this.filters = new Filters(params);
    this.roots = [];
    this.stats = new Map(); // trace id -> {run_count, total_tokens, errors, seen}
    this.ticks = 0;
    this.closed = false;
    this.build();
  }

  sameFilters(params) {
    return (params.get("project") || "") === this.projectKey && this.filters.same(params);
  }

  build() {
    this.projectSelect = h("select", { id: "project", "aria-label": "project" });
    this.threadsLink = h("a", { href: "#/threads", class: "tab" }, "Threads");
    this.chartsLink = h("a", { href: "#/", class: "tab" }, "Charts");
    this.summary = h("span", { class: "summary", "aria-live": "polite" });
    this.tbody = h("tbody");
    this.empty = h("p", { class: "empty" });
    this.projectSelect.addEventListener("change", () => this.filtersChanged());
    this.element = h(
      "section",
      { class: "list" },
      h(
        "div",
        { class: "filters" },
        h("label", { for: "project" }, "Project"),
        this.projectSelect,
        this.threadsLink,
        this.chartsLink,
        this.filters.controls(() => this.filtersChanged()),
        this.summary,
      ),
      h(
        "table",
        { class: "traces" },
        h(
          "thead",
          null,
          h("tr", null, ["Name", "Input", "Output", "Status", "Start", "Latency", "Tokens", "Cost", "Runs"].map((t) => h("th", { class: `col-${t.toLowerCase()}` }, t))),
        ),
        this.tbody,
      ),
      this.empty,
    );
  }

  close() {
    this.closed = true;
  }

  filtersChanged() {
    this.projectKey = this.projectSelect.value;
    this.filters.read();
    const params = new URLSearchParams(this.projectKey ? { project: this.projectKey } : {});
    for (const [key, value] of this.filters.params()) params.set(key, value);
    const query = params.toString();
    // replaceState: typing a search should not leave a history entry per letter.
    history.replaceState(null, "", query ? `#/?${query}` : "#/");
    this.roots = [];
    this.render();
    this.load().catch((error) => this.app.failed(error));
  }

  async open() {
    this.app.setCrumbs(h("span", null, "Traces"));
    this.fillProjects(this.app.projects || []);
    await this.load().catch((error) => this.app.failed(error));
  }

  fillProjects(projects) {
    // The project whose runs are newest comes first, and is the one shown when none is named.
    const sorted = [...projects].sort((a, b) =>
      String(b.last_run_start_time || b.start_time || "").localeCompare(String(a.last_run_start_time || a.start_time || "")),
    );
    this.projects = sorted;
    replace(
      this.projectSelect,
      sorted.map((p) => h("option", { value: projectLabel(p) }, cut(projectLabel(p), 100), p.run_count !== undefined ? ` (${fmtInt(p.run_count)} run${p.run_count === 1 ? "" : "s"})` : "")),
    );
    if (!this.projectKey && sorted.length) this.projectKey = projectLabel(sorted[0]);
    this.projectSelect.value = this.projectKey;
    this.threadsLink.setAttribute("href", `#/threads?project=${encodeURIComponent(this.projectKey)}`);
    this.chartsLink.setAttribute("href", `#/projects/${encodeURIComponent(this.projectKey)}`);
  }

  project() {
    return (this.projects || []).find((p) => projectLabel(p) === this.projectKey || p.id === this.projectKey);
  }

  query() {
    const project = this.project();
    return this.filters.apply({ session: [project.id], is_root: true, limit: PAGE, select: ROOT_FIELDS }, this.asOf);
  }

  async load() {
    if (!this.project()) {
      this.render();
      return;
    }
    await this.loadRoots();
    // The first rows get their counts right away; the poller fills in the rest.
    const missing = this.staleTraces();
    const workers = Array.from({ length: Math.min(FIRST_STATS, missing.length) }, async () => {
      while (missing.length && !this.closed) await this.loadStats(missing.shift());
    });
    await Promise.all(workers);
  }

  async loadRoots() {
    this.asOf = Date.now(); // "the last hour" is the hour before this read
    const body = this.query();
    const asked = JSON.stringify(body);
    const answer = await api.query(body);
    // An answer to filters the user has since changed is dropped, not drawn over the new ones.
    if (this.closed || asked !== JSON.stringify(this.query())) return;
    this.roots = (answer.runs || []).filter((run) => isUuid(run.id));
    this.more = Boolean(answer.cursors && answer.cursors.next);
    this.render();
  }

  // Traces whose counts are unknown, or may still change because the trace is open.
  staleTraces() {
    return this.roots
      .filter((root) => {
        const known = this.stats.get(root.trace_id || root.id);
        return !known || known.seen !== `${root.status}|${root.end_time}` || statusOf(root) === "open";
      });
  }

  async loadStats(root) {
    const traceId = root.trace_id || root.id;
    const stats = await api.stats({ trace: traceId });
    if (this.closed) return;
    const runs = Number(stats.run_count) || 0;
    this.stats.set(traceId, {
      runs,
      tokens: Number(stats.total_tokens) || 0,
      cost: stats.total_cost,
      errors: Math.round((Number(stats.error_rate) || 0) * runs),
      seen: `${root.status}|${root.end_time}`,
    });
    this.render();
  }

  // One request per tick: the list itself every third tick (or when no count is due), counts otherwise.
  pollJob() {
    this.ticks += 1;
    // Projects now and then (a new app starts tracing), and every tick until there is one to show.
    if (!this.project() || this.ticks % 15 === 0) {
      return api.projects().then((projects) => {
        this.app.projects = projects;
        this.fillProjects(projects);
        this.render();
      });
    }
    const stale = this.staleTraces();
    if (this.ticks % 3 === 0 || !stale.length) return this.loadRoots();
    return this.loadStats(stale[0]);
  }

  render() {
    const project = this.project();
    const rows = this.roots.map((root) => this.row(root));
    replace(this.tbody, rows);
    if (!project && this.projectKey && (this.projects || []).length) {
      this.summary.textContent = "";
      replace(this.empty, `No project named ${cut(this.projectKey, 100)}: pick one above.`);
      return;
    }
    if (!project) {
      this.summary.textContent = "";
      replace(
        this.empty,
        "No runs yet. Point an exporter at ",
        h("code", null, location.origin),
        " (OTEL_EXPORTER_RUNS_ENDPOINT) and its traces appear here.",
      );
      return;
    }
    this.summary.textContent = `${this.roots.length}${this.more ? "+" : ""} trace${this.roots.length === 1 ? "" : "s"}, newest first`;
    this.empty.textContent = this.roots.length ? "" : "No traces match.";
  }

  row(root) {
    const traceId = root.trace_id || root.id;
    const status = statusOf(root);
    const start = parseTime(root.start_time);
    const end = parseTime(root.end_time);
    const stats = this.stats.get(traceId);
    const href = link(traceId);
    const tr = h(
      "tr",
      { class: `trace status-row-${status}`, "data-trace-id": traceId },
      h("td", { class: "col-name" }, h("a", { href, title: cut(root.name || "", 1000) }, cut(root.name || "(unnamed)"))),
      previewCell("col-input", root.preview && root.preview.input),
      previewCell("col-output", root.preview && root.preview.output),
      h(
        "td",
        { class: "col-status" },
        statusBadge(status),
        stats && stats.errors && status !== "error" ? h("span", { class: "inner-errors", title: "runs inside this trace that failed" }, ` ${stats.errors} failed`) : null,
      ),
      h("td", { class: "col-start" }, fmtTime(start)),
      h("td", { class: "col-latency" }, status === "open" ? "…" : fmtDuration(end - start)),
      h("td", { class: "col-tokens" }, stats ? fmtInt(stats.tokens) : "…"),
      h("td", { class: "col-cost" }, stats ? (stats.tokens || (stats.cost !== null && stats.cost !== undefined) ? fmtCost(stats.cost) : "") : "…"),
      h("td", { class: "col-runs" }, stats ? fmtInt(stats.runs) : "…"),
    );
    // The whole row opens the trace; the name stays a real link to copy or open in a tab.
    tr.addEventListener("click", (event) => {
      if (event.target.closest("a")) return;
      location.hash = href;
    });
    return tr;
  }
}

// One side of a trace's preview: a line the service cut to a fixed length, cut again to the cell by the page.
function previewCell(cls, text) {
  const said = typeof text === "string" ? text : "";
  return h("td", { class: `${cls} preview`, title: said ? cut(said, 300) : undefined }, said ? h("span", null, cut(said, 300)) : h("span", { class: "none" }, "—"));
}
