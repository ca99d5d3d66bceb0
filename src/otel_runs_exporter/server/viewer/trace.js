// One trace: the run tree in dotted_order order beside a waterfall on one time axis,
// and the selected run's details; new and changed runs shown as they arrive (a pause
// control stops that), marked live while the service says the trace is (an open run
// stored within its live window).
//
// Each row names its run whole (names up to ~40 characters at 1366 px): what gives way
// when the row is short is the model and the numbers, each shown whole or not at all.
// A row with runs under it shows their tokens and cost added up.
//
// Only the rows in view are in the page (a fixed row height makes that simple), so a
// 10,000-run trace costs as much to show as a 50-run one; a trace that large also
// opens with only the root's children unfolded.
//
// Where the runs are read is `source` (api.js by default: query, stats, changes, feedback, and the run
// page's run, violations, addFeedback); `readOnly` leaves out the controls that write and the links to the
// keyed pages (the list, threads). A shared trace's page is new TraceView(app, traceId, runId,
// { source: itsReads, readOnly: true }).

import { api } from "./api.js";
import {
  copyButton, cut, fmtCost, fmtDuration, fmtInt, fmtTime, h, link, parseTime, replace, statusBadge, statusOf, typeBadge,
} from "./dom.js";
import { badges, summaryText, traceFeedback } from "./feedback.js";
import { RunView } from "./run.js";

const ROW_H = 26;
const OVERSCAN = 15;
const PAGE = 100; // the query endpoint's largest page
// The service's own usage fields too (a root's are its trace's totals), and the local service's model and price row.
const TREE_FIELDS = [
  "name", "run_type", "start_time", "end_time", "status", "parent_run_id", "dotted_order", "trace_id",
  "total_tokens", "total_cost", "model", "requested_model", "priced_as", "thread_id", "session_id",
];
const FOLD_ABOVE = 500; // runs; a larger trace opens folded below the root's children
const LIVE_WAIT_S = 20; // how long the service holds a request for the trace's changes
const REDRAW_EVERY_MS = 300; // while pages arrive

export class TraceView {
  constructor(app, traceId, runId, { source = api, readOnly = false } = {}) {
    this.app = app;
    this.source = source;
    this.readOnly = readOnly;
    this.traceId = traceId;
    this.selected = runId;
    this.started = performance.now();
    this.runs = new Map();
    this.nodes = [];
    this.visible = [];
    this.toggled = new Set(); // runs folded or unfolded by hand, against the default
    this.fold = false;
    this.closed = false;
    this.cursor = null; // where the changes feed (GET /runs/changes) left off
    this.paused = false; // the page's pause control: no more changes asked for
    this.live = false; // what the service last said: an open run stored within its live window
    this.detail = new RunView(app, { source, readOnly });
    this.detail.onFeedback = (item) => this.feedbackAdded(item);
    this.feedback = null; // run id -> feedback items, once read
    this.build();
  }

  build() {
    this.title = h("h1", null, "Trace");
    this.facts = h("div", { class: "facts" });
    this.spacer = h("div", { class: "spacer" });
    this.rowsLayer = h("div", { class: "rows" });
    this.scroller = h("div", { class: "tree", role: "tree", tabindex: "0" }, this.spacer, this.rowsLayer);
    this.axis = h("div", { class: "axis" });
    this.progress = h("span", { class: "progress", "aria-live": "polite" });
    let pending = false;
    const redraw = () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        this.renderRows();
      });
    };
    this.scroller.addEventListener("scroll", redraw);
    // A taller window shows more rows: the ones now in view are drawn, not left blank until a scroll.
    this.resized = new ResizeObserver(redraw);
    this.resized.observe(this.scroller);
    const tools = h(
      "div",
      { class: "tools" },
      h("button", { type: "button", onclick: () => this.setFold(false) }, "Unfold all"),
      h("button", { type: "button", onclick: () => this.setFold(true) }, "Fold to first level"),
      h("button", { type: "button", onclick: () => this.reload() }, "Reload"),
      (this.pauseButton = h("button", { type: "button", class: "live-toggle", hidden: true, onclick: () => this.setPaused(!this.paused) }, "Pause")),
      (this.liveMark = h("span", { class: "live", hidden: true, title: "the trace has a run still open, stored within the last minutes: new and changed runs are shown as they arrive" }, "● live")),
      this.progress,
    );
    this.element = h(
      "section",
      { class: "trace-view", "data-trace-id": this.traceId },
      h("div", { class: "tracehead" }, this.title, this.facts, tools),
      h(
        "div",
        { class: "split" },
        h(
          "div",
          { class: "treepane" },
          h("div", { class: "treehead" }, h("div", { class: "cell-name" }, "Run"), this.axis),
          this.scroller,
        ),
        this.detail.element,
      ),
    );
  }

  close() {
    this.closed = true;
    this.resized.disconnect();
  }

  crumbs(name) {
    this.app.setCrumbs(this.readOnly ? null : h("a", { href: "#/" }, "Traces"), h("span", null, name));
  }

  async open() {
    this.crumbs("trace");
    if (this.selected) this.detail.show(this.selected, this.traceId);
    try {
      await this.load();
    } catch (error) {
      this.app.failed(error);
    }
  }

  setPaused(paused) {
    this.paused = paused;
    this.showLive();
  }

  // The live mark and its pause control show while the trace is live (or paused while it was).
  setLive(live) {
    if (typeof live !== "boolean") return;
    this.element.dataset.live = String(live); // what the service said last (the tests read it)
    if (live === this.live) return;
    this.live = live;
    this.showLive();
  }

  showLive() {
    const shown = this.live || this.paused;
    this.pauseButton.hidden = !shown;
    this.liveMark.hidden = !shown;
    this.pauseButton.textContent = this.paused ? "Resume" : "Pause";
    this.liveMark.textContent = this.paused ? "paused" : "● live";
    this.liveMark.className = this.paused ? "live live-paused" : "live";
  }

  async reload() {
    this.runs = new Map();
    this.started = performance.now();
    for (const key of ["openedMs", "openedAt", "loadedMs", "loadedAt"]) delete this.element.dataset[key];
    try {
      await this.load();
    } catch (error) {
      this.app.failed(error);
    }
  }

  async load() {
    this.stats = null;
    // Where the changes feed starts: taken before the first page, so nothing stored meanwhile is missed (a run
    // read twice is merged). Refused (a 429), the page loads without it and asks again later.
    // A source without a changes feed (a shared trace's) is read once.
    this.cursor = !this.source.changes ? null : await this.source.changes(`trace=${encodeURIComponent(this.traceId)}`).then((a) => {
      this.setLive(a.live);
      return a.cursor;
    }, () => null);
    // The counts decide whether the tree opens folded; asked for beside the first page, not before it.
    // A refused count (/runs/stats is the most rate-limited read) must not keep the tree from showing.
    const stats = this.loadStats().then(() => null, (error) => error);
    this.pass = { cursor: null, loaded: new Map(), stats, folding: true, lastDraw: 0, running: false };
    await this.continueLoad();
  }

  // Reads the rest of the trace from where the last page left off; a refused page (a 429 midway
  // through a large trace) leaves the pass in place for the poller to resume after its back-off.
  async continueLoad() {
    const pass = this.pass;
    pass.running = true;
    try {
      do {
        const body = { trace: this.traceId, order: "asc", limit: PAGE, select: TREE_FIELDS };
        if (pass.cursor) body.cursor = pass.cursor;
        const answer = await this.source.query(body);
        if (this.closed || pass !== this.pass) return; // closed, or a Reload started over
        for (const run of answer.runs || []) pass.loaded.set(run.id, run);
        pass.cursor = answer.cursors && answer.cursors.next;
        if (pass.folding) {
          await pass.stats;
          if (this.closed || pass !== this.pass) return;
          // Without the count, more than one page of runs is what a large trace looks like.
          this.fold = this.stats ? this.stats.runs > FOLD_ABOVE : Boolean(pass.cursor);
          pass.folding = false;
        }
        // Oldest first, so the first page holds the root and its first children: draw it at once.
        if (!pass.cursor || !this.element.dataset.openedMs || performance.now() - pass.lastDraw > REDRAW_EVERY_MS) {
          this.runs = pass.loaded;
          this.rebuild();
          pass.lastDraw = performance.now();
          if (!this.element.dataset.openedMs && this.nodes.length) {
            // How long the trace took to show: since the view began, and since the page was requested.
            this.element.dataset.openedMs = String(Math.round(performance.now() - this.started));
            this.element.dataset.openedAt = String(Math.round(performance.now()));
          }
        }
        const total = this.stats ? ` of ${fmtInt(this.stats.runs)}` : "";
        this.progress.textContent = pass.cursor ? `loading… ${fmtInt(pass.loaded.size)}${total} runs` : "";
      } while (pass.cursor);
    } finally {
      pass.running = false;
    }
    this.pass = null;
    this.element.dataset.loadedMs = String(Math.round(performance.now() - this.started));
    this.element.dataset.loadedAt = String(Math.round(performance.now()));
    this.element.dataset.runs = String(this.runs.size);
  }

  async loadFeedback() {
    this.feedback = await traceFeedback(this.traceId, this.source);
    if (this.closed) return;
    this.renderRows();
    this.renderHead();
  }

  feedbackAdded(item) {
    if (!this.feedback) this.feedback = new Map();
    const runId = String(item.run_id || "");
    this.feedback.set(runId, [...(this.feedback.get(runId) || []), item]);
    this.renderRows();
    this.renderHead();
  }

  async loadStats() {
    const stats = await this.source.stats({ trace: this.traceId });
    const runs = Number(stats.run_count) || 0;
    this.stats = {
      runs,
      tokens: Number(stats.total_tokens) || 0,
      prompt: Number(stats.prompt_tokens) || 0,
      completion: Number(stats.completion_tokens) || 0,
      errors: Math.round((Number(stats.error_rate) || 0) * runs),
      cost: stats.total_cost,
      promptCost: stats.prompt_cost,
      completionCost: stats.completion_cost,
      unpriced: Number(stats.unpriced_runs) || 0,
      pricesOf: stats.prices_updated,
    };
  }

  // One background request per tick: the rest of the trace, its counts, its feedback, then its changes as they
  // come (a long poll held by the service until a run of the trace is stored or changed): a trace of any size stays
  // current, a request per change or per LIVE_WAIT_S. Counts are asked again after a change.
  pollJob() {
    if (!this.element.dataset.loadedMs) {
      // A load the service refused midway resumes here, so the poller's back-off paces it.
      return this.pass && !this.pass.running ? this.continueLoad() : null;
    }
    if (!this.stats || this.statsStale) {
      return this.loadStats().then(() => {
        this.statsStale = false;
        if (!this.closed) this.renderHead();
      });
    }
    if (!this.feedback && this.source.feedback) return this.loadFeedback();
    if (this.paused || !this.source.changes) return null;
    if (!this.cursor) {
      return this.source.changes(`trace=${encodeURIComponent(this.traceId)}`).then((a) => {
        this.cursor = a.cursor;
        this.setLive(a.live);
      });
    }
    return this.follow();
  }

  async follow() {
    const asked = this.cursor;
    const answer = await this.source.changes(`trace=${encodeURIComponent(this.traceId)}&after=${encodeURIComponent(asked)}&wait=${LIVE_WAIT_S}`);
    // Closed, reloaded meanwhile, or paused: nothing changes on the page (a paused one asks again from the same
    // cursor when resumed, so what came meanwhile is shown then).
    if (this.closed || this.cursor !== asked || this.paused) return;
    this.setLive(answer.live);
    this.cursor = answer.cursor;
    const runs = answer.runs || [];
    if (!runs.length) return;
    const before = this.selected && this.runs.get(this.selected);
    for (const run of runs) this.runs.set(run.id, { ...(this.runs.get(run.id) || {}), ...run });
    this.statsStale = true;
    this.rebuild();
    this.element.dataset.runs = String(this.runs.size);
    this.element.dataset.changes = String((Number(this.element.dataset.changes) || 0) + runs.length);
    const after = this.selected && this.runs.get(this.selected);
    if (after && (!before || before.status !== after.status)) this.detail.show(this.selected, this.traceId);
  }

  setFold(fold) {
    this.fold = fold;
    this.toggled.clear();
    this.revealSelected();
    this.layout();
  }

  select(runId) {
    this.selected = runId;
    if (runId) this.detail.show(runId, this.traceId);
    else this.detail.clear();
    this.revealSelected();
    this.layout();
    this.scrollToSelected();
  }

  // The run tree in dotted_order order; descendants follow their ancestor, so one
  // pass gives each run its depth and how many runs its subtree holds.
  rebuild() {
    const runs = [...this.runs.values()];
    runs.sort((a, b) => {
      const x = a.dotted_order || "";
      const y = b.dotted_order || "";
      return x < y ? -1 : x > y ? 1 : 0;
    });
    const nodes = runs.map((run) => ({
      run,
      depth: run.dotted_order ? run.dotted_order.split(".").length - 1 : 0,
      start: parseTime(run.start_time),
      end: parseTime(run.end_time),
      status: statusOf(run),
      size: 0,
    }));
    const stack = [];
    nodes.forEach((node, index) => {
      while (stack.length && nodes[stack[stack.length - 1]].depth >= node.depth) {
        const done = stack.pop();
        nodes[done].size = index - done - 1;
      }
      stack.push(index);
    });
    for (const done of stack) nodes[done].size = nodes.length - done - 1;
    addUp(nodes);
    this.nodes = nodes;
    const now = Date.now();
    let t0 = Infinity;
    let t1 = -Infinity;
    for (const node of nodes) {
      if (Number.isFinite(node.start)) t0 = Math.min(t0, node.start);
      const end = Number.isFinite(node.end) ? node.end : node.status === "open" ? now : node.start;
      if (Number.isFinite(end)) t1 = Math.max(t1, end);
    }
    this.t0 = t0;
    this.span = Math.max(t1 - t0, 0.001);
    this.revealSelected();
    this.layout();
    this.renderHead();
    if (this.selected) this.scrollToSelected();
  }

  folded(node) {
    if (!node.size) return false;
    const byDefault = this.fold && node.depth >= 1;
    return this.toggled.has(node.run.id) ? !byDefault : byDefault;
  }

  // Unfold the ancestors of the selected run so a deep link to it shows it.
  revealSelected() {
    const target = this.selected && this.runs.get(this.selected);
    if (!target || !target.dotted_order) return;
    const prefix = target.dotted_order;
    for (const node of this.nodes) {
      if (node.run.id !== target.id && node.run.dotted_order && prefix.startsWith(node.run.dotted_order + ".") && this.folded(node)) {
        this.toggled.has(node.run.id) ? this.toggled.delete(node.run.id) : this.toggled.add(node.run.id);
      }
    }
  }

  layout() {
    const visible = [];
    let hideBelow = Infinity;
    for (const node of this.nodes) {
      if (node.depth > hideBelow) continue;
      hideBelow = Infinity;
      visible.push(node);
      if (this.folded(node)) hideBelow = node.depth;
    }
    this.visible = visible;
    this.spacer.style.height = `${visible.length * ROW_H}px`;
    this.renderRows();
  }

  scrollToSelected() {
    const index = this.visible.findIndex((node) => node.run.id === this.selected);
    if (index < 0) return;
    const top = index * ROW_H;
    const view = this.scroller.clientHeight;
    if (top < this.scroller.scrollTop || top + ROW_H > this.scroller.scrollTop + view) {
      this.scroller.scrollTop = Math.max(0, top - view / 3);
    }
  }

  renderRows() {
    const top = this.scroller.scrollTop;
    const height = this.scroller.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
    const last = Math.min(this.visible.length, Math.ceil((top + height) / ROW_H) + OVERSCAN);
    const rows = [];
    for (let i = first; i < last; i += 1) rows.push(this.row(this.visible[i], i));
    replace(this.rowsLayer, rows);
    wholeOrNone(this.rowsLayer);
  }

  row(node, index) {
    const run = node.run;
    const folded = this.folded(node);
    const toggle = node.size
      ? h(
          "button",
          { type: "button", class: "toggle", "aria-expanded": folded ? "false" : "true", title: folded ? "unfold" : "fold" },
          folded ? "▸" : "▾",
        )
      : h("span", { class: "toggle-space" });
    if (node.size) {
      toggle.addEventListener("click", (event) => {
        event.preventDefault();
        event.stopPropagation();
        this.toggled.has(run.id) ? this.toggled.delete(run.id) : this.toggled.add(run.id);
        this.layout();
      });
    }
    const indent = h("span", { class: "indent" });
    indent.style.width = `${node.depth * 16}px`;
    const duration = Number.isFinite(node.end) ? node.end - node.start : NaN;
    const bar = h("span", { class: `bar bar-${node.status}` });
    const left = Number.isFinite(node.start) ? ((node.start - this.t0) / this.span) * 100 : 0;
    const right = Number.isFinite(node.end) ? ((node.end - this.t0) / this.span) * 100 : node.status === "open" ? 100 : left;
    bar.style.left = `${Math.max(0, Math.min(100, left))}%`;
    bar.style.width = `${Math.max(0, Math.min(100 - left, right - left))}%`;
    const a = h(
      "a",
      {
        class: `row${run.id === this.selected ? " selected" : ""}${node.status === "error" ? " row-error" : ""}`,
        href: link(this.traceId, run.id),
        role: "treeitem",
        "aria-selected": run.id === this.selected ? "true" : "false",
        "data-run-id": run.id,
        "data-depth": node.depth,
      },
      h(
        "span",
        { class: "cell-name" },
        indent,
        toggle,
        typeBadge(run.run_type),
        h("span", { class: "name", title: cut(run.name || "", 1000) }, cut(run.name || "(unnamed)")),
        node.status === "error" ? h("span", { class: "err-mark", title: "this run ended with an error" }, "error") : null,
        node.status === "open" ? h("span", { class: "open-mark", title: "no end time yet" }, "open") : null,
        folded ? h("span", { class: "hidden-count", title: "runs folded under this one" }, `+${fmtInt(node.size)}`) : null,
        this.feedback ? badges(this.feedback.get(run.id)) : null,
        usageCell(node),
      ),
      h(
        "span",
        { class: "cell-bar", title: `${fmtDuration(duration) || "no end"} from ${fmtDuration(node.start - this.t0)}` },
        bar,
        h("span", { class: "dur" }, Number.isFinite(duration) ? fmtDuration(duration) : "…"),
      ),
    );
    a.style.top = `${index * ROW_H}px`;
    return a;
  }

  renderHead() {
    const root = this.nodes.length ? this.nodes[0] : null;
    if (!root) {
      this.title.textContent = "Trace";
      replace(this.facts, h("p", { class: "empty" }, `No runs in trace ${this.traceId} (yet): the page keeps looking.`));
      return;
    }
    const run = root.run;
    replace(this.title, typeBadge(run.run_type), " ", cut(run.name || "(unnamed)"), " ", statusBadge(root.status));
    const latency = Number.isFinite(root.end) ? fmtDuration(root.end - root.start) : "still open";
    // Until the counts come (a rate-limited /runs/stats), what the loaded runs tell; tokens are not among them.
    const stats = this.stats || { runs: this.runs.size, tokens: null, errors: this.nodes.filter((n) => n.status === "error").length };
    replace(
      this.facts,
      fact("start", fmtTime(root.start)),
      fact("latency", latency),
      fact("runs", fmtInt(Math.max(stats.runs, this.runs.size))),
      fact("tokens", stats.tokens === null ? "…" : stats.tokens ? `${fmtInt(stats.tokens)} (in ${fmtInt(stats.prompt)}, out ${fmtInt(stats.completion)})` : "0"),
      fact("failed runs", fmtInt(stats.errors)),
      fact("cost", stats.tokens === null ? "…" : costText(stats)),
      this.source.feedback ? fact("feedback", this.feedback ? summaryText(this.feedback) : "…") : null,
      run.thread_id && !this.readOnly
        ? h("span", { class: "fact" }, h("span", { class: "label" }, "thread"),
            h("a", { href: `#/threads/${encodeURIComponent(String(run.thread_id))}?project=${encodeURIComponent(String(run.session_id || ""))}` }, cut(String(run.thread_id), 80)))
        : null,
      h("span", { class: "fact" }, h("span", { class: "label" }, "trace id"), h("code", null, this.traceId), copyButton(this.traceId, "trace id")),
    );
    this.crumbs(cut(run.name || "trace", 80));
    this.renderAxis();
  }

  renderAxis() {
    const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => {
      const tick = h("span", { class: "tick" }, f ? fmtDuration(f * this.span) : "0");
      tick.style.left = `${f * 100}%`;
      return tick;
    });
    replace(this.axis, ticks);
  }
}

function fact(label, value) {
  return h("span", { class: "fact" }, h("span", { class: "label" }, label), h("span", { class: "value" }, value));
}

// Each run's tokens and cost with those of the runs under it (node.total), from the service's per-run fields:
// a root's are its whole trace's already, another run's are its own. Nodes are in tree order, so a run's
// subtree follows it: a stack gives each its parent, and one pass back adds each into its parent.
function addUp(nodes) {
  const parents = new Array(nodes.length).fill(-1);
  const stack = [];
  nodes.forEach((node, index) => {
    while (stack.length && nodes[stack[stack.length - 1]].depth >= node.depth) stack.pop();
    parents[index] = stack.length ? stack[stack.length - 1] : -1;
    stack.push(index);
    const run = node.run;
    const tokens = Number(run.total_tokens) || 0;
    const priced = run.total_cost !== null && run.total_cost !== undefined && Number.isFinite(Number(run.total_cost));
    node.total = { tokens, cost: priced ? Number(run.total_cost) : null, unpriced: tokens && !priced ? 1 : 0, whole: !run.parent_run_id };
  });
  for (let index = nodes.length - 1; index >= 0; index -= 1) {
    const parent = parents[index];
    if (parent < 0 || nodes[parent].total.whole) continue; // a root's fields are its trace's totals already
    const into = nodes[parent].total;
    const from = nodes[index].total;
    into.tokens += from.tokens;
    into.unpriced += from.unpriced;
    if (from.cost !== null) into.cost = (into.cost || 0) + from.cost;
  }
}

// What the stylesheet cannot do: a row's last number wider than the room the name leaves (it cannot wrap away,
// being alone on its line) is hidden, not shown cut. Measured once per drawing of the rows in view.
function wholeOrNone(layer) {
  for (const usage of layer.querySelectorAll(".usage")) {
    const room = usage.getBoundingClientRect();
    for (const part of usage.children) {
      const at = part.getBoundingClientRect();
      if (at.left < room.left - 0.5 && at.top < room.bottom - 0.5) part.style.visibility = "hidden";
    }
  }
}

// A row's model (the one the run asked for; the one that answered in its title), tokens and cost: its own, or
// with a run under it, its subtree's. Each shown whole or not at all (app.css: what does not fit wraps out of sight).
function usageCell(node) {
  const run = node.run;
  const { tokens, cost, unpriced } = node.total;
  const model = run.requested_model || run.model;
  if (!model && !tokens && cost === null) return null;
  const under = node.size ? ` for this run and the ${fmtInt(node.size)} under it` : "";
  const answered = run.model && run.model !== model ? `; answered by ${cut(String(run.model), 100)}` : "";
  const priced = run.priced_as === "carried" ? ", as the run reported it" : run.priced_as && !node.size ? `, priced as ${cut(run.priced_as, 100)}` : "";
  const missing = unpriced ? ` (${fmtInt(unpriced)} model run${unpriced === 1 ? "" : "s"} without a price not counted)` : "";
  return h(
    "span",
    { class: "usage" },
    model ? h("span", { class: "model", title: `model asked for: ${cut(String(model), 100)}${answered}` }, cut(String(model), 40)) : null,
    tokens ? h("span", { class: "tok", title: `${fmtInt(tokens)} tokens${under}` }, `${fmtInt(tokens)} tok`) : null,
    tokens || cost !== null
      ? h(
          "span",
          {
            class: cost !== null ? "cost" : "cost cost-none",
            title: cost !== null ? `${fmtCost(cost)}${under}${priced}${missing}` : "no price: the price table has no row for this model (otel-runs serve --prices FILE adds one)",
          },
          fmtCost(cost),
        )
      : null,
  );
}

function costText(stats) {
  if (stats.cost === null || stats.cost === undefined) return stats.unpriced ? "no price" : "none";
  const parts = [`${fmtCost(stats.cost)} (in ${fmtCost(stats.promptCost)}, out ${fmtCost(stats.completionCost)})`];
  if (stats.unpriced) parts.push(`, ${fmtInt(stats.unpriced)} model run${stats.unpriced === 1 ? "" : "s"} without a price`);
  return parts.join("");
}
