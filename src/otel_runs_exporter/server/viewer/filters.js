// The list's filters: each one a parameter of the page's link (#/?q=...&since=1h), a control,
// and its part of the POST /runs/query body, in the filter language the SDK's list_runs takes.
//
// On the trace (its root run): status, start time range, latency and tokens (a root's
// tokens are its whole trace's). On one run anywhere in the trace (tree_filter): the
// search text, run type, model and feedback together describe that run ("a tool run
// that says timeout", "a gpt-4o call with a thumbs down").

import { quote } from "./api.js";
import { THUMBS } from "./feedback.js";
import { h } from "./dom.js";

const STATUSES = [["", "any status"], ["ok", "ok"], ["error", "error"], ["open", "open"]];
const RANGES = [["", "any time"], ["15m", "last 15 min"], ["1h", "last hour"], ["24h", "last 24 h"], ["7d", "last 7 days"], ["custom", "custom…"]];
const AGO_MS = { "15m": 15 * 60_000, "1h": 3_600_000, "24h": 86_400_000, "7d": 7 * 86_400_000 };
const TYPES = ["", "chain", "llm", "tool", "retriever", "embedding", "prompt", "parser"];
const FEEDBACK = [["", "any feedback"], ["up", "▲ thumbs up"], ["down", "▼ thumbs down"]];
const FEEDBACK_FILTERS = {
  up: `and(eq(feedback_key, "${THUMBS}"), eq(feedback_score, 1))`,
  down: `and(eq(feedback_key, "${THUMBS}"), eq(feedback_score, 0))`,
};
const KEYS = ["status", "q", "since", "until", "type", "model", "latency", "tokens", "feedback"];

function isoOrNull(text) {
  const ms = Date.parse(text);
  return text && Number.isFinite(ms) ? new Date(ms).toISOString() : null;
}

function number(text) {
  const n = Number(text);
  return text !== "" && text !== null && Number.isFinite(n) && n >= 0 ? n : null;
}

// An ISO time as a datetime-local input's value (the browser's own zone).
function localInput(iso) {
  const ms = Date.parse(iso || "");
  if (!Number.isFinite(ms)) return "";
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60_000);
  return d.toISOString().slice(0, 16);
}

export class Filters {
  constructor(params) {
    const get = (key) => (params.get(key) || "").trim();
    this.values = {
      status: STATUSES.some(([v]) => v === get("status")) ? get("status") : "",
      q: get("q"),
      since: AGO_MS[get("since")] ? get("since") : isoOrNull(get("since")) || "",
      until: isoOrNull(get("until")) || "",
      type: TYPES.includes(get("type")) ? get("type") : "",
      model: get("model"),
      latency: number(get("latency")) === null ? "" : get("latency"),
      tokens: number(get("tokens")) === null ? "" : get("tokens"),
      feedback: FEEDBACK_FILTERS[get("feedback")] ? get("feedback") : "",
    };
  }

  same(params) {
    return new Filters(params).key() === this.key();
  }

  key() {
    return this.params().toString();
  }

  params() {
    const params = new URLSearchParams();
    for (const key of KEYS) if (this.values[key]) params.set(key, this.values[key]);
    return params;
  }

  active() {
    return KEYS.some((key) => this.values[key]);
  }

  // The controls, each calling `changed` when it is set; values are read back in read().
  controls(changed) {
    const v = this.values;
    const select = (id, label, options, value) => {
      const el = h("select", { id, "aria-label": label }, options.map(([o, text]) => h("option", { value: o }, text)));
      el.value = value;
      el.addEventListener("change", changed);
      return el;
    };
    const input = (id, label, type, placeholder, value, wait = 400) => {
      const el = h("input", { type, id, "aria-label": label, placeholder, autocomplete: "off", spellcheck: "false" });
      el.value = value;
      let timer = null;
      el.addEventListener("input", () => {
        clearTimeout(timer);
        timer = setTimeout(changed, wait);
      });
      return el;
    };
    const custom = v.since && !AGO_MS[v.since];
    this.el = {
      q: input("search", "search", "search", "text in any run…", v.q, 300),
      status: select("status", "status", STATUSES, v.status),
      range: select("range", "time range", RANGES, custom ? "custom" : v.since),
      since: input("since", "from", "datetime-local", "", custom ? localInput(v.since) : "", 600),
      until: input("until", "until", "datetime-local", "", localInput(v.until), 600),
      type: select("type", "run type", TYPES.map((t) => [t, t || "any run type"]), v.type),
      model: input("model", "model", "text", "model", v.model),
      latency: input("latency", "latency at least (s)", "number", "≥ s", v.latency),
      tokens: input("tokens", "tokens at least", "number", "≥ tokens", v.tokens),
      feedback: select("feedback", "feedback", FEEDBACK, v.feedback),
    };
    this.el.latency.min = "0";
    this.el.tokens.min = "0";
    this.el.latency.step = "any";
    const showCustom = () => {
      const on = this.el.range.value === "custom";
      this.el.since.hidden = !on;
      this.el.until.hidden = !on;
    };
    this.el.range.addEventListener("change", showCustom);
    showCustom();
    const e = this.el;
    const pair = (id, label, ...controls) => h("span", { class: "filter" }, h("label", { for: id }, label), controls);
    return [
      pair("search", "Search", e.q),
      pair("status", "Status", e.status),
      pair("range", "Started", e.range, e.since, e.until),
      pair("type", "Run", e.type, e.model),
      pair("latency", "Latency", e.latency),
      pair("tokens", "Tokens", e.tokens),
      pair("feedback", "Feedback", e.feedback),
    ];
  }

  // The controls' values, checked as the link's are.
  read() {
    const e = this.el;
    const range = e.range.value;
    const params = new URLSearchParams();
    const set = (key, value) => value && params.set(key, value);
    set("status", e.status.value);
    set("q", e.q.value.trim());
    if (range === "custom") {
      set("since", isoOrNull(e.since.value) || "");
      set("until", isoOrNull(e.until.value) || "");
    } else {
      set("since", range);
    }
    set("type", e.type.value);
    set("model", e.model.value.trim());
    set("latency", e.latency.value);
    set("tokens", e.tokens.value);
    set("feedback", e.feedback.value);
    this.values = new Filters(params).values;
  }

  // Their part of a POST /runs/query body for root runs; `now` fixes "last hour" to one moment.
  apply(body, now = Date.now()) {
    const v = this.values;
    const onRoot = [];
    if (v.status === "error") body.error = true;
    if (v.status === "ok") onRoot.push('eq(status, "success")');
    if (v.status === "open") onRoot.push('eq(status, "pending")');
    if (v.since) body.start_time = AGO_MS[v.since] ? new Date(now - AGO_MS[v.since]).toISOString() : v.since;
    if (v.until) onRoot.push(`lt(start_time, ${quote(v.until)})`);
    if (v.latency) onRoot.push(`gte(latency, ${Number(v.latency)})`);
    if (v.tokens) onRoot.push(`gte(total_tokens, ${Number(v.tokens)})`);
    if (onRoot.length) body.filter = onRoot.length === 1 ? onRoot[0] : `and(${onRoot.join(", ")})`;
    const onRun = [];
    if (v.q) onRun.push(`search(${quote(v.q)})`);
    if (v.type) onRun.push(`eq(run_type, ${quote(v.type)})`);
    if (v.model) onRun.push(`eq(model, ${quote(v.model)})`);
    if (v.feedback) onRun.push(FEEDBACK_FILTERS[v.feedback]);
    if (onRun.length) body.tree_filter = onRun.length === 1 ? onRun[0] : `and(${onRun.join(", ")})`;
    return body;
  }
}
