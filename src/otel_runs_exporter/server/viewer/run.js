// One run, as GET /runs/{id} answers it, content first: a one-line summary (type, name, status, latency,
// tokens, cost, model), then its inputs and outputs (chat messages as a chat, messages.js; anything else as
// keys and values, values.js), a failed run's error where its outputs go, and after them, folded where long:
// rule violations, events, ids and times, the model's parameters, metadata, feedback.
//
// Where the run is read is the view's `source` (api.js by default: run, violations, feedback, addFeedback);
// `readOnly` leaves out every control that writes (the feedback form). A shared, read-only page passes a
// source of its own and readOnly: true; nothing else changes.

import { ApiError, api } from "./api.js";
import {
  clipped, copyButton, cut, fmtCost, fmtDuration, fmtInt, fmtTime, h, link, parseTime, replace, statusBadge, statusOf, typeBadge,
} from "./dom.js";
import { feedbackBlock } from "./feedback.js";
import { conversationView, findConversation } from "./messages.js";
import { bigText, foldedText, isObject, plainView, settle, valueView } from "./values.js";

const NAME_AT = 120; // characters of a run's name in its heading (two lines at most; "show all" for the rest)
const TAGS_AT = 100; // tags shown before a "show all"
const OPEN_KEYS = 8; // a metadata or parameters block with more keys opens folded
const ERROR_LINES = 6; // lines of an error's text shown before "show more"

export class RunView {
  constructor(app, { source = api, readOnly = false } = {}) {
    this.app = app;
    this.source = source;
    this.readOnly = readOnly;
    this.element = h("aside", { class: "detail", "aria-live": "polite" });
    this.onFeedback = null; // the trace's view, told of feedback added here
    // Folded text gets its "show more" once it is drawn: now, and when a fold or a <details> opens.
    const later = () => requestAnimationFrame(() => settle(this.element));
    this.element.addEventListener("toggle", later, true);
    this.element.addEventListener("click", later);
    this.clear();
  }

  clear() {
    this.current = null;
    replace(this.element, h("p", { class: "hint" }, "Select a run to see its inputs, outputs and details."));
  }

  async show(runId, traceId) {
    this.current = runId;
    replace(this.element, h("p", { class: "loading" }, "Loading the run…"));
    const source = this.source;
    const optional = (read) => (read ? read(runId).catch((error) => ({ failed: error.message })) : Promise.resolve(null));
    let run;
    let violations;
    let feedback;
    try {
      // Violations and feedback are asked alongside; failing to read them must not hide the run.
      [run, violations, feedback] = await Promise.all([
        source.run(runId),
        optional(source.violations),
        optional(source.feedback && ((id) => source.feedback(`run=${encodeURIComponent(id)}`))),
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
    const save = this.readOnly || !source.addFeedback ? null : (body) => source.addFeedback(body);
    const added = (item) => this.onFeedback && this.onFeedback(item);
    replace(this.element, renderRun(run, { traceId, violations, feedback, save, added }));
    this.element.scrollTop = 0;
    settle(this.element);
  }
}

function section(title, ...body) {
  return h("section", { class: "block" }, h("h2", null, title), ...body);
}

// A block whose body is folded when it is long: its title says how long.
function foldable(title, count, body, open) {
  const details = h("details", { class: "block fold-block" }, h("summary", null, h("h2", null, title), count ? h("span", { class: "count" }, ` ${count}`) : null), body);
  details.open = open;
  return details;
}

function renderRun(run, { traceId, violations, feedback, save, added }) {
  const extra = isObject(run.extra) ? run.extra : {};
  const metadata = isObject(extra.metadata) ? extra.metadata : null;
  const invocation = isObject(extra.invocation_params) ? extra.invocation_params : null;
  const blocks = [summary(run, metadata, invocation)];
  blocks.push(h("section", { class: "block io io-in" }, h("h2", null, "Inputs"), ioView(run.inputs)));
  // A failed run's error is what it gave back: where its outputs go (and its outputs after it, when it has some).
  if (run.error !== undefined && run.error !== null) blocks.push(errorBlock(String(run.error)));
  if (!(run.error !== undefined && run.error !== null && (run.outputs === undefined || run.outputs === null))) {
    blocks.push(h("section", { class: "block io io-out" }, h("h2", null, "Outputs"), ioView(run.outputs)));
  }
  const ruled = violationsBlock(violations);
  if (ruled) blocks.push(ruled);
  if (Array.isArray(run.events) && run.events.length) {
    blocks.push(foldable("Events", fmtInt(run.events.length), h("ol", { class: "events" }, run.events.map(eventView)), run.events.length <= 5));
  }
  blocks.push(detailsBlock(run, traceId));
  if (invocation) {
    const keys = Object.keys(invocation).length;
    blocks.push(foldable("Model and parameters", `${fmtInt(keys)} key${keys === 1 ? "" : "s"}`, plainView(invocation, 0), keys <= OPEN_KEYS));
  }
  if (metadata) {
    const keys = Object.keys(metadata).length;
    blocks.push(foldable("Metadata", `${fmtInt(keys)} key${keys === 1 ? "" : "s"}`, plainView(metadata, 0), keys <= OPEN_KEYS));
  }
  if (Array.isArray(feedback) || save) {
    blocks.push(feedbackBlock(run, Array.isArray(feedback) ? feedback : [], { save, added }));
  } else if (feedback && feedback.failed) {
    blocks.push(section("Feedback", h("p", { class: "empty" }, `Cannot read it: ${feedback.failed}`)));
  }
  const otherExtra = Object.fromEntries(Object.entries(extra).filter(([k]) => k !== "metadata" && k !== "invocation_params"));
  if (Object.keys(otherExtra).length) blocks.push(foldable("Extra", "", valueView(otherExtra), false));
  return h("div", { class: "run", "data-run-id": run.id }, blocks);
}

// The one-line summary: what the run is, how it went, what it took.
function summary(run, metadata, invocation) {
  const start = parseTime(run.start_time);
  const end = parseTime(run.end_time);
  const usage = tokenUsage(run);
  const asked = (metadata && (metadata.ls_model_name || metadata.model)) || (invocation && (invocation.model || invocation.model_name));
  const answered = (metadata && metadata.response_model) || run.model;
  const provider = metadata && metadata.ls_provider;
  const priced = run.total_cost !== null && run.total_cost !== undefined;
  const whole = !run.parent_run_id;
  const facts = [
    fact("latency", Number.isFinite(end) ? fmtDuration(end - start) : "open", "latency"),
    usage ? fact(whole ? "tokens, whole trace" : "tokens", `${fmtInt(usage.total)} tok`, "tokens", `${fmtInt(usage.input)} in, ${fmtInt(usage.output)} out`) : null,
    priced || usage ? fact(whole ? "cost, whole trace" : "cost", fmtCost(run.total_cost), "cost") : null,
    asked || answered
      ? fact("model", cut(String(asked || answered), 120) + (provider ? ` (${cut(String(provider), 40)})` : ""), "model",
          answered && answered !== asked ? `answered by ${cut(String(answered), 200)}` : "")
      : null,
    fact("started", fmtTime(start), "start"),
  ];
  return h(
    "header",
    { class: "runhead" },
    h("h2", { class: "runname" }, typeBadge(run.run_type), " ", clipped(run.name || "(unnamed)", { limit: NAME_AT }), " ", statusBadge(statusOf(run))),
    h("div", { class: "runfacts" }, facts),
  );
}

function fact(label, value, kind, note) {
  return h("span", { class: `rfact rfact-${kind}`, title: note ? `${label}: ${note}` : label }, value);
}

// Inputs or outputs: a conversation as a chat (with the value's other keys after it), else keys and values.
function ioView(value) {
  if (value === undefined || value === null) return h("p", { class: "none" }, "none");
  if (typeof value === "string") return foldedText(value, { cls: "content" });
  const conversation = findConversation(value);
  if (!conversation) return valueView(value);
  const rest = conversation.rest && Object.keys(conversation.rest).length ? conversation.rest : null;
  return h("div", null, conversationView(conversation.messages), rest ? h("div", { class: "io-rest" }, valueView(rest, 1)) : null);
}

// The error: its last line (the exception and its message) first, the whole text folded under it.
function errorBlock(text) {
  const lines = text.trim().split("\n");
  const last = lines[lines.length - 1] || text;
  const whole = lines.length > 1 ? bigText(text, "error fold") : null;
  if (whole) (whole.matches("pre") ? whole : whole.querySelector("pre")).style.setProperty("--lines", String(ERROR_LINES));
  return h("section", { class: "block error-block" }, h("h2", null, "Error"), h("div", { class: "error-line" }, clipped(last, { limit: 1000 })), whole);
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

// Ids, times, tags, tokens and cost in full: what the summary says in short, and where the run sits.
function detailsBlock(run, traceId) {
  const start = parseTime(run.start_time);
  const end = parseTime(run.end_time);
  const usage = tokenUsage(run);
  const tags = Array.isArray(run.tags) ? run.tags : [];
  return section(
    "Details",
    h(
      "dl",
      { class: "kv ids" },
      kv("start", fmtTime(start)),
      kv("end", Number.isFinite(end) ? fmtTime(end) : "no end time yet"),
      usage ? kv("tokens", `${fmtInt(usage.total)} total: ${fmtInt(usage.input)} in, ${fmtInt(usage.output)} out`) : null,
      costRow(run),
      tags.length ? kv("tags", tagList(tags)) : null,
      idRow("run id", run.id),
      idRow("trace id", run.trace_id),
      run.parent_run_id ? idRow("parent run id", run.parent_run_id) : null,
      dottedRow(run.dotted_order),
      idRow("link", new URL(link(traceId || run.trace_id, run.id), location.href).href),
    ),
  );
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

// The dotted order, a line per level of the tree, folded: one id per level is long and rarely read.
function dottedRow(value) {
  if (typeof value !== "string" || !value) return null;
  const levels = value.split(".").length;
  const details = h("details", { class: "dotted" }, h("summary", null, `${fmtInt(levels)} level${levels === 1 ? "" : "s"}`), clipped(value, { tag: "code", cls: "id" }));
  return [h("dt", null, "dotted_order"), h("dd", null, details, copyButton(value, "dotted_order"))];
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
  if (!isObject(event)) return h("li", null, plainView(event, 1));
  const rest = Object.fromEntries(Object.entries(event).filter(([k]) => k !== "name" && k !== "time"));
  return h(
    "li",
    { class: "event" },
    clipped(event.name || "event", { limit: 200, cls: "event-name" }),
    " ",
    h("span", { class: "event-time" }, event.time ? fmtTime(parseTime(String(event.time))) : ""),
    Object.keys(rest).length ? plainView(rest, 0) : null,
  );
}
