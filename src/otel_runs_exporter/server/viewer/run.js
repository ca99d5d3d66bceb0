// One run, as GET /runs/{id} answers it: inputs and outputs (chat messages as a
// conversation, anything else as folding JSON), its error, events, tokens, model,
// metadata, tags, timing and ids.

import { ApiError, api, shareToken } from "./api.js";
import {
  clipped, copyButton, cut, fmtBytes, fmtCost, fmtDuration, fmtInt, fmtTime, h, link, parseTime, replace, statusBadge, statusOf, typeBadge,
} from "./dom.js";
import { feedbackBlock } from "./feedback.js";

const TRUNCATE_AT = 100 * 1024; // characters of JSON; larger values show this much and a "show all"
const STRING_AT = 10 * 1024; // characters of one string inside JSON or a message (a long prompt shows whole)
const NAME_AT = 300; // characters of a run's name in its heading
const TAGS_AT = 100; // tags shown before a "show all"
const OPEN_LEVELS = 2; // JSON levels unfolded at first
const ROLES = new Set(["system", "developer", "user", "human", "assistant", "ai", "tool", "function", "chat", "model"]);

export class RunView {
  constructor(app) {
    this.app = app;
    this.element = h("aside", { class: "detail", "aria-live": "polite" });
    this.onFeedback = null; // the trace's view, told of feedback added here
    this.clear();
  }

  clear() {
    this.current = null;
    replace(this.element, h("p", { class: "hint" }, "Select a run to see its inputs, outputs and details."));
  }

  async show(runId, traceId) {
    this.current = runId;
    replace(this.element, h("p", { class: "loading" }, "Loading the run…"));
    let run;
    let violations;
    let feedback;
    try {
      // Violations and feedback are asked alongside; failing to read them must not hide the run.
      [run, violations, feedback] = await Promise.all([
        api.run(runId),
        api.violations(runId).catch((error) => ({ failed: error.message })),
        api.feedback(`run=${encodeURIComponent(runId)}`).catch((error) => ({ failed: error.message })),
      ]);
    } catch (error) {
      if (this.current !== runId) return;
      if (error instanceof ApiError && error.status === 404) {
        replace(this.element, h("p", { class: "empty" }, `Run ${runId} is not stored (yet).`));
        return;
      }
      if (error instanceof ApiError && error.status === 429) {
        replace(this.element, h("p", { class: "empty" }, "The service is rate limiting this page (429). Select the run again in a moment."));
        return;
      }
      this.app.failed(error);
      replace(this.element, h("p", { class: "empty" }, `Cannot read run ${runId}: ${error.message}`));
      return;
    }
    if (this.current !== runId) return; // another run was selected meanwhile
    const added = (item) => this.onFeedback && this.onFeedback(item);
    replace(this.element, renderRun(run, traceId, violations, feedback, added));
  }
}

function section(title, ...body) {
  return h("section", { class: "block" }, h("h2", null, title), ...body);
}

// The rule violations the service recorded for this run: stored anyway by the default mode (what the
// hosted service accepts) or by --lenient; the exporter's own runs should have none.
function violationsBlock(violations) {
  if (violations && violations.failed) {
    return section("Rule violations", h("p", { class: "empty" }, `Cannot read them: ${violations.failed}`));
  }
  if (!Array.isArray(violations) || !violations.length) return null;
  const items = violations.map((v) =>
    h(
      "li",
      { class: "violation" },
      h("code", null, clipped(String(v.rule || "?"), { limit: 100 })),
      " ",
      clipped(String(v.msg || ""), { limit: 1000 }),
      v.accepted ? " (stored anyway)" : " (refused)",
    ),
  );
  return section(`Rule violations (${fmtInt(violations.length)})`, h("ul", { class: "violations" }, items));
}

function renderRun(run, traceId, violations, feedback, added) {
  const status = statusOf(run);
  const start = parseTime(run.start_time);
  const end = parseTime(run.end_time);
  const extra = isObject(run.extra) ? run.extra : {};
  const metadata = isObject(extra.metadata) ? extra.metadata : null;
  const invocation = isObject(extra.invocation_params) ? extra.invocation_params : null;
  const model = (metadata && (metadata.ls_model_name || metadata.model)) || (invocation && (invocation.model || invocation.model_name));
  const provider = metadata && metadata.ls_provider;
  const usage = tokenUsage(run);
  const tags = Array.isArray(run.tags) ? run.tags : [];
  const blocks = [
    h(
      "header",
      { class: "runhead" },
      h("h2", { class: "runname" }, typeBadge(run.run_type), " ", clipped(run.name || "(unnamed)", { limit: NAME_AT }), " ", statusBadge(status)),
    ),
    h(
      "dl",
      { class: "kv" },
      kv("start", fmtTime(start)),
      kv("end", Number.isFinite(end) ? fmtTime(end) : "no end time yet"),
      kv("latency", Number.isFinite(end) ? fmtDuration(end - start) : "open"),
      model ? kv("model", clipped(String(model) + (provider ? ` (${provider})` : ""))) : null,
      usage ? kv("tokens", `${fmtInt(usage.total)} total: ${fmtInt(usage.input)} in, ${fmtInt(usage.output)} out`) : null,
      costRow(run),
      tags.length ? kv("tags", tagList(tags)) : null,
    ),
    section(
      "Ids",
      h(
        "dl",
        { class: "kv ids" },
        idRow("run id", run.id),
        idRow("trace id", run.trace_id),
        run.parent_run_id ? idRow("parent run id", run.parent_run_id) : null,
        idRow("dotted_order", run.dotted_order),
        idRow("link", new URL(link(traceId || run.trace_id, run.id), location.href).href),
      ),
    ),
  ];
  const ruled = violationsBlock(violations);
  if (ruled) blocks.push(ruled);
  if (!shareToken) {
    // A shared trace is read-only, and its feedback is not shared.
    blocks.push(
      Array.isArray(feedback)
        ? feedbackBlock(run, feedback, added)
        : section("Feedback", h("p", { class: "empty" }, `Cannot read it: ${feedback && feedback.failed}`)),
    );
  }
  if (run.error !== undefined && run.error !== null) {
    blocks.push(section("Error", bigText(String(run.error), "error")));
  }
  blocks.push(section("Inputs", valueView(run.inputs)));
  blocks.push(section("Outputs", valueView(run.outputs)));
  if (Array.isArray(run.events) && run.events.length) {
    blocks.push(section(`Events (${run.events.length})`, h("ol", { class: "events" }, run.events.map(eventView))));
  }
  if (metadata) blocks.push(section("Metadata", valueView(metadata)));
  const otherExtra = Object.fromEntries(Object.entries(extra).filter(([k]) => k !== "metadata"));
  if (Object.keys(otherExtra).length) blocks.push(section("Extra", valueView(otherExtra)));
  return h("div", { class: "run", "data-run-id": run.id }, blocks);
}

// Each tag clipped, and at most TAGS_AT of them until asked for the rest.
function tagList(tags) {
  const holder = h("span", { class: "tags" });
  const show = (list) => list.map((t) => clipped(t, { limit: 200, cls: "tag" }));
  if (tags.length <= TAGS_AT) return replace(holder, show(tags));
  const more = h("button", { type: "button", class: "show-all" }, `show all ${fmtInt(tags.length)} tags`);
  more.addEventListener("click", () => replace(holder, show(tags)));
  return replace(holder, show(tags.slice(0, TAGS_AT)), more);
}

// The service's cost fields: a root's are its whole trace's; a model run's own, from the price table or as it reported.
function costRow(run) {
  const priced = run.total_cost !== null && run.total_cost !== undefined;
  const tokens = Number(run.total_tokens) || 0;
  if (!priced && !tokens) return null;
  const label = run.parent_run_id ? "cost" : "cost (whole trace)";
  if (!priced) {
    const which = run.model ? `model ${cut(String(run.model), 200)} is` : "the model is";
    return kv(label, `no price: ${which} not in the price table (otel-runs serve --prices FILE adds it)`);
  }
  const how = run.priced_as === "carried" ? "as the run reported it" : run.priced_as ? `priced as ${cut(String(run.priced_as), 200)}` : "";
  const parts = `${fmtCost(run.total_cost)}: ${fmtCost(run.prompt_cost)} in, ${fmtCost(run.completion_cost)} out`;
  return kv(label, how ? `${parts} (${how})` : parts);
}

function kv(label, value) {
  return [h("dt", null, label), h("dd", null, value)];
}

function idRow(label, value) {
  if (value === undefined || value === null || value === "") return null;
  const text = String(value);
  // The copy button copies all of it, however much is shown.
  return [h("dt", null, label), h("dd", null, clipped(text, { tag: "code", cls: "id" }), copyButton(text, label))];
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

// Token counts as the service's client writes them (outputs.usage_metadata), or the run's own fields.
function tokenUsage(run) {
  const usage = isObject(run.outputs) && isObject(run.outputs.usage_metadata) ? run.outputs.usage_metadata : null;
  const input = usage ? Number(usage.input_tokens) : Number(run.prompt_tokens);
  const output = usage ? Number(usage.output_tokens) : Number(run.completion_tokens);
  let total = usage ? Number(usage.total_tokens) : Number(run.total_tokens);
  if (!Number.isFinite(total)) total = (Number.isFinite(input) ? input : 0) + (Number.isFinite(output) ? output : 0);
  if (!total && !input && !output) return null;
  return { input: input || 0, output: output || 0, total };
}

function eventView(event) {
  if (!isObject(event)) return h("li", null, valueView(event));
  const rest = Object.fromEntries(Object.entries(event).filter(([k]) => k !== "name" && k !== "time"));
  return h(
    "li",
    { class: "event" },
    clipped(event.name || "event", { limit: 200, cls: "event-name" }),
    " ",
    h("span", { class: "event-time" }, event.time ? fmtTime(parseTime(String(event.time))) : ""),
    Object.keys(rest).length ? valueView(rest) : null,
  );
}

// A value too large to draw whole shows its first 100 KB as text, and a button for the rest.
function valueView(value) {
  if (value === undefined || value === null) return h("p", { class: "none" }, "none");
  let text;
  try {
    text = JSON.stringify(value, null, 2);
  } catch {
    text = String(value);
  }
  if (text.length > TRUNCATE_AT) {
    const holder = h("div", { class: "truncated" });
    const button = h("button", { type: "button", class: "show-all" }, `show all (${fmtBytes(text.length)})`);
    button.addEventListener("click", () => replace(holder, h("pre", { class: "json-text" }, text)));
    replace(
      holder,
      h("p", { class: "note" }, `Shown truncated: the first ${fmtBytes(TRUNCATE_AT)} of ${fmtBytes(text.length)}.`),
      h("pre", { class: "json-text" }, text.slice(0, TRUNCATE_AT), "\n…"),
      button,
    );
    return holder;
  }
  const conversation = findConversation(value);
  if (conversation) {
    const parts = [h("div", { class: "conversation" }, conversation.messages.map(messageView))];
    if (conversation.rest && Object.keys(conversation.rest).length) parts.push(jsonTree(conversation.rest, 0));
    return h("div", null, parts);
  }
  return jsonTree(value, 0);
}

function isMessage(value) {
  if (!isObject(value)) return false;
  const role = roleOf(value);
  return Boolean(role) && ("content" in value || "parts" in value || "tool_calls" in value || "text" in value);
}

export function roleOf(message) {
  const role = typeof message.role === "string" ? message.role : typeof message.type === "string" ? message.type : "";
  return ROLES.has(role.toLowerCase()) ? role.toLowerCase() : "";
}

function messageList(value) {
  if (!Array.isArray(value) || !value.length) return null;
  // LangChain writes a batch of conversations: [[...messages]]; one of them is the usual case.
  const flat = value.length === 1 && Array.isArray(value[0]) ? value[0] : value;
  return flat.length && flat.every(isMessage) ? flat : null;
}

// Chat messages wherever the common clients put them: a list of messages, or
// messages / input / output / prompt keys, or OpenAI's choices[].message.
export function findConversation(value) {
  const direct = messageList(value);
  if (direct) return { messages: direct, rest: null };
  if (!isObject(value)) return null;
  for (const key of ["messages", "input", "inputs", "output", "prompt", "prompts"]) {
    const list = messageList(value[key]);
    if (list) {
      const rest = { ...value };
      delete rest[key];
      return { messages: list, rest };
    }
  }
  if (Array.isArray(value.choices) && value.choices.length && value.choices.every((c) => isObject(c) && isMessage(c.message))) {
    const rest = { ...value };
    delete rest.choices;
    return { messages: value.choices.map((c) => c.message), rest };
  }
  return null;
}

function messageView(message) {
  const role = roleOf(message);
  const body = [];
  const content = "content" in message ? message.content : "parts" in message ? message.parts : message.text;
  if (typeof content === "string") {
    body.push(clipped(content, { limit: STRING_AT, tag: "div", cls: "content" }));
  } else if (Array.isArray(content)) {
    for (const part of content) {
      if (typeof part === "string") body.push(clipped(part, { limit: STRING_AT, tag: "div", cls: "content" }));
      else if (isObject(part) && part.type === "text" && typeof (part.text ?? part.content) === "string") {
        body.push(clipped(part.text ?? part.content, { limit: STRING_AT, tag: "div", cls: "content" }));
      } else body.push(jsonTree(part, 1));
    }
  } else if (content !== undefined && content !== null) {
    body.push(jsonTree(content, 1));
  }
  const rest = Object.fromEntries(
    Object.entries(message).filter(([k]) => !["role", "type", "content", "parts", "text"].includes(k) && message[k] !== null),
  );
  if (Object.keys(rest).length) body.push(jsonTree(rest, 1));
  return h("div", { class: `message role-${role}` }, h("div", { class: "role" }, role), body);
}

// JSON as nested <details>: a level's entries are built when it is first unfolded.
function jsonTree(value, depth) {
  if (value === null) return h("span", { class: "j-null" }, "null");
  if (typeof value === "string") return clipped(value, { limit: STRING_AT, cls: "j-str" });
  if (typeof value === "number" || typeof value === "bigint") return h("span", { class: "j-num" }, String(value));
  if (typeof value === "boolean") return h("span", { class: "j-bool" }, String(value));
  if (typeof value !== "object") return h("span", null, String(value));
  const isArray = Array.isArray(value);
  const entries = isArray ? value.map((v, i) => [i, v]) : Object.entries(value);
  if (!entries.length) return h("span", { class: "j-empty" }, isArray ? "[]" : "{}");
  const summary = h("summary", null, isArray ? `[ ${entries.length} item${entries.length === 1 ? "" : "s"} ]` : `{ ${entries.length} key${entries.length === 1 ? "" : "s"} }`);
  const details = h("details", { class: "json" }, summary);
  let built = false;
  const build = () => {
    if (built) return;
    built = true;
    append(details, entries, depth);
  };
  details.addEventListener("toggle", build);
  if (depth < OPEN_LEVELS) {
    details.open = true;
    build();
  }
  return details;
}

function append(details, entries, depth) {
  const list = h("div", { class: "entries" });
  for (const [key, child] of entries) {
    list.appendChild(h("div", { class: "entry" }, clipped(key, { cls: "j-key" }), h("span", { class: "colon" }, ": "), jsonTree(child, depth + 1)));
  }
  details.appendChild(list);
}

function bigText(text, kind) {
  if (text.length <= TRUNCATE_AT) return h("pre", { class: kind }, text);
  const holder = h("div", { class: "truncated" });
  const button = h("button", { type: "button", class: "show-all" }, `show all (${fmtBytes(text.length)})`);
  button.addEventListener("click", () => replace(holder, h("pre", { class: kind }, text)));
  replace(holder, h("pre", { class: kind }, text.slice(0, TRUNCATE_AT), "\n…"), button);
  return holder;
}
