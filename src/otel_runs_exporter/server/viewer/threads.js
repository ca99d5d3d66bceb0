// Conversations: the traces that share a thread key (metadata session_id, thread_id or
// conversation_id) as turns, through the SDK's threads reads (POST /api/v2/threads/query,
// GET /api/v2/threads/{id}/traces). #/threads?project=NAME lists a project's threads;
// #/threads/KEY shows one turn by turn: what the user said, the final answer, latency,
// tokens and cost, each turn linking to its trace.

import { api } from "./api.js";
import { clipped, cut, fmtCost, fmtDuration, fmtInt, fmtTime, h, link, parseTime, replace } from "./dom.js";
import { findConversation, roleOf } from "./messages.js";

const TURN_SELECTS = ["TRACE_ID", "TURN_NUMBER", "NAME", "START_TIME", "LATENCY", "INPUTS", "OUTPUTS", "ERROR", "TOTAL_TOKENS", "TOTAL_COST"];
const MAX_TURNS = 1000; // turns read, 100 a page
const EVER = "1970-01-01T00:00:00Z"; // the threads API defaults to the last day; a conversation may be older

function projectLabel(project) {
  return project.name || project.id;
}

function projectsOf(app, key) {
  const all = app.projects || [];
  const named = all.filter((p) => projectLabel(p) === key || p.id === key);
  // Newest activity first, the order the list shows them in.
  const rest = all.filter((p) => !named.includes(p)).sort((a, b) => String(b.last_run_start_time || "").localeCompare(String(a.last_run_start_time || "")));
  return key ? named : rest;
}

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((part) => (typeof part === "string" ? part : part && typeof part.text === "string" ? part.text : "")).filter(Boolean).join("\n");
  }
  return "";
}

// The last message of a role among `value`'s messages, else its one string, else its JSON.
export function said(value, roles) {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  const conversation = findConversation(value);
  if (conversation) {
    const mine = conversation.messages.filter((m) => roles.includes(roleOf(m)));
    const last = mine.length ? mine[mine.length - 1] : conversation.messages[conversation.messages.length - 1];
    const text = textOf(last.content ?? last.parts ?? last.text);
    if (text) return text;
  }
  if (typeof value === "object" && !Array.isArray(value)) {
    const strings = Object.values(value).filter((v) => typeof v === "string");
    if (strings.length === 1) return strings[0];
  }
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

export class ThreadView {
  constructor(app, threadId, params) {
    this.app = app;
    this.threadId = threadId;
    this.projectKey = params.get("project") || "";
    this.closed = false;
    this.title = h("h1", null, "Thread ", h("code", null, cut(threadId, 200)));
    this.facts = h("div", { class: "facts" });
    this.turns = h("ol", { class: "turns" });
    this.element = h("section", { class: "thread-view", "data-thread-id": threadId }, h("div", { class: "tracehead" }, this.title, this.facts), this.turns);
  }

  close() {
    this.closed = true;
  }

  async open() {
    this.app.setCrumbs(h("a", { href: "#/" }, "Traces"), h("a", { href: `#/threads${this.projectKey ? `?project=${encodeURIComponent(this.projectKey)}` : ""}` }, "Threads"), h("span", null, cut(this.threadId, 80)));
    replace(this.turns, h("li", { class: "loading" }, "Loading the conversation…"));
    try {
      await this.load();
    } catch (error) {
      this.app.failed(error);
    }
  }

  async load() {
    // A thread key is a project's: the one named in the link, else the first project that has it.
    for (const project of projectsOf(this.app, this.projectKey)) {
      const turns = await this.read(project.id);
      if (this.closed) return;
      if (turns.length) {
        this.project = project;
        this.render(turns);
        return;
      }
    }
    replace(this.turns, h("li", { class: "empty" }, `No traces of thread ${cut(this.threadId, 200)} in ${this.projectKey ? `project ${cut(this.projectKey, 100)}` : "any project"}.`));
  }

  async read(projectId) {
    const turns = [];
    let cursor = null;
    do {
      const query = new URLSearchParams({ project_id: projectId, page_size: "100" });
      for (const select of TURN_SELECTS) query.append("selects", select);
      if (cursor) query.set("cursor", cursor);
      const answer = await api.threadTraces(this.threadId, query.toString());
      turns.push(...(answer.items || []));
      cursor = answer.next_cursor;
    } while (cursor && turns.length < MAX_TURNS && !this.closed);
    return turns;
  }

  render(turns) {
    let tokens = 0;
    let cost = 0;
    let unpriced = 0;
    for (const turn of turns) {
      tokens += Number(turn.total_tokens) || 0;
      if (turn.total_cost === null || turn.total_cost === undefined) unpriced += turn.total_tokens ? 1 : 0;
      else cost += Number(turn.total_cost);
    }
    const first = parseTime(turns[0].start_time);
    const last = parseTime(turns[turns.length - 1].start_time);
    replace(
      this.facts,
      fact("project", cut(projectLabel(this.project), 100)),
      fact("turns", fmtInt(turns.length)),
      fact("from", fmtTime(first)),
      fact("to", fmtTime(last)),
      fact("tokens", fmtInt(tokens)),
      fact("cost", unpriced && !cost ? "no price" : `${fmtCost(cost)}${unpriced ? ` (${fmtInt(unpriced)} turn${unpriced === 1 ? "" : "s"} without a price)` : ""}`),
    );
    replace(this.turns, turns.map((turn) => this.turn(turn)));
  }

  turn(turn) {
    const traceId = String(turn.trace_id || "");
    const user = said(turn.inputs, ["user", "human"]);
    const answer = said(turn.outputs, ["assistant", "ai", "model"]);
    const latency = Number(turn.latency);
    return h(
      "li",
      { class: `turn${turn.error ? " turn-error" : ""}`, "data-trace-id": traceId },
      h(
        "div",
        { class: "turnhead" },
        h("a", { href: link(traceId), class: "turn-number" }, `Turn ${fmtInt(Number(turn.turn_number) || 0)}`),
        h("span", { class: "turn-name" }, cut(turn.name || "", 100)),
        h("span", { class: "fact" }, h("span", { class: "label" }, "at"), fmtTime(parseTime(turn.start_time))),
        h("span", { class: "fact" }, h("span", { class: "label" }, "latency"), Number.isFinite(latency) ? fmtDuration(latency * 1000) : "open"),
        h("span", { class: "fact" }, h("span", { class: "label" }, "tokens"), fmtInt(Number(turn.total_tokens) || 0)),
        h("span", { class: "fact turn-cost" }, h("span", { class: "label" }, "cost"), turn.total_tokens || turn.total_cost !== null ? fmtCost(turn.total_cost) : "none"),
      ),
      h("div", { class: "message role-user" }, h("div", { class: "role" }, "user"), clipped(user || "(no input)", { limit: 2000, tag: "div", cls: "content" })),
      turn.error
        ? h("pre", { class: "error" }, cut(String(turn.error), 2000))
        : h("div", { class: "message role-assistant" }, h("div", { class: "role" }, "answer"), clipped(answer || "(no output)", { limit: 2000, tag: "div", cls: "content" })),
    );
  }
}

// #/threads?project=NAME: the project's conversations, the latest activity first.
export class ThreadsView {
  constructor(app, params) {
    this.app = app;
    this.projectKey = params.get("project") || "";
    this.closed = false;
    this.body = h("tbody");
    this.empty = h("p", { class: "empty" });
    this.element = h(
      "section",
      { class: "list" },
      h("table", { class: "traces threads" }, h("thead", null, h("tr", null, ["Thread", "Turns", "Last activity", "First input", "Tokens", "Cost"].map((t) => h("th", null, t)))), this.body),
      this.empty,
    );
  }

  close() {
    this.closed = true;
  }

  async open() {
    const project = projectsOf(this.app, this.projectKey)[0];
    this.app.setCrumbs(h("a", { href: "#/" }, "Traces"), h("span", null, `Threads${project ? ` of ${cut(projectLabel(project), 80)}` : ""}`));
    if (!project) {
      this.empty.textContent = "No project yet.";
      return;
    }
    try {
      const answer = await api.threads({ project_id: project.id, min_start_time: EVER, page_size: 100 });
      if (this.closed) return;
      const items = answer.items || [];
      const query = `?project=${encodeURIComponent(projectLabel(project))}`;
      replace(
        this.body,
        items.map((t) =>
          h(
            "tr",
            { class: "thread" },
            h("td", null, h("a", { href: `#/threads/${encodeURIComponent(String(t.thread_id))}${query}` }, cut(String(t.thread_id), 100))),
            h("td", { class: "col-runs" }, fmtInt(Number(t.count) || 0)),
            h("td", null, fmtTime(parseTime(t.max_start_time))),
            h("td", null, cut(String(t.first_inputs || ""), 120)),
            h("td", { class: "col-tokens" }, fmtInt(Number(t.total_tokens) || 0)),
            h("td", { class: "col-cost" }, t.total_tokens || t.total_cost !== null ? fmtCost(t.total_cost) : ""),
          ),
        ),
      );
      this.empty.textContent = items.length ? "" : "No threads: traces join one by a session_id, thread_id or conversation_id in their metadata.";
    } catch (error) {
      this.app.failed(error);
    }
  }
}

function fact(label, value) {
  return h("span", { class: "fact" }, h("span", { class: "label" }, label), h("span", { class: "value" }, value));
}
