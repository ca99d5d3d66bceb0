// Feedback on runs: what the SDK's create_feedback (or this page) kept, shown on a run,
// on its tree row and in the trace's header; and the page's one write, a thumbs up or
// down with a comment (POST /feedback, as create_feedback sends it).

import { api } from "./api.js";
import { clipped, cut, fmtInt, fmtTime, h, parseTime, replace } from "./dom.js";

export const THUMBS = "thumbs"; // the key the page's thumbs are kept under: score 1 up, 0 down
const PAGES = 10; // a trace's feedback read 100 at a time, at most this many pages

// Every item of a trace, by run id (items name their run; a POST /feedback need not name the trace), read
// from `source` (api.js's feedback, or a shared page's own).
export async function traceFeedback(traceId, source = api) {
  const byRun = new Map();
  for (let page = 0; page < PAGES; page += 1) {
    const items = await source.feedback(`trace=${encodeURIComponent(traceId)}&limit=100&offset=${page * 100}`);
    for (const item of items || []) {
      const runId = String(item.run_id || "");
      if (!byRun.has(runId)) byRun.set(runId, []);
      byRun.get(runId).push(item);
    }
    if (!items || items.length < 100) break;
  }
  return byRun;
}

function isThumb(item) {
  return item.key === THUMBS && (item.score === 1 || item.score === 0 || item.score === true || item.score === false);
}

// Up and down counts of the thumbs among `items`, and how many other items there are.
export function tally(items) {
  let up = 0;
  let down = 0;
  let other = 0;
  for (const item of items) {
    if (isThumb(item)) Number(item.score) === 1 ? (up += 1) : (down += 1);
    else other += 1;
  }
  return { up, down, other };
}

// The small marks a tree row carries: ▲ n (thumbs up), ▼ n (down), and other feedback counted.
export function badges(items) {
  if (!items || !items.length) return null;
  const { up, down, other } = tally(items);
  return h(
    "span",
    { class: "fb-badges", title: `${fmtInt(items.length)} feedback item${items.length === 1 ? "" : "s"}` },
    up ? h("span", { class: "fb-up" }, `▲${up}`) : null,
    down ? h("span", { class: "fb-down" }, `▼${down}`) : null,
    other ? h("span", { class: "fb-other" }, `◆${other}`) : null,
  );
}

function scoreText(item) {
  if (isThumb(item)) return Number(item.score) === 1 ? "▲ up" : "▼ down";
  const parts = [];
  if (item.score !== null && item.score !== undefined) parts.push(`score ${String(item.score)}`);
  if (item.value !== null && item.value !== undefined) parts.push(`value ${typeof item.value === "string" ? item.value : JSON.stringify(item.value)}`);
  return parts.join(", ") || "—";
}

function itemView(item) {
  const source = item.feedback_source && typeof item.feedback_source.type === "string" ? item.feedback_source.type : "";
  return h(
    "li",
    { class: "fb-item", "data-feedback-id": String(item.id || "") },
    h("span", { class: "fb-key" }, cut(String(item.key || "?"), 100)),
    " ",
    h("span", { class: "fb-score" }, cut(scoreText(item), 200)),
    item.comment ? h("div", { class: "fb-comment" }, clipped(String(item.comment), { limit: 2000 })) : null,
    h("div", { class: "fb-meta" }, [source ? `${cut(source, 40)} · ` : "", fmtTime(parseTime(String(item.created_at || "")))]),
  );
}

// The run's feedback and, when `save` is given (POST /feedback; none on a read-only page), the form to add a
// thumbs up or down with a comment; `added` is called with the new item.
export function feedbackBlock(run, items, { save = null, added = null } = {}) {
  const list = h("ul", { class: "fb-list" });
  const show = (all) => replace(list, all.length ? all.map(itemView) : h("li", { class: "none" }, "none yet"));
  show(items);
  const block = h("section", { class: "block feedback" }, h("h2", null, `Feedback${items.length ? ` (${fmtInt(items.length)})` : ""}`), list);
  if (!save) return block;
  const comment = h("textarea", { class: "fb-text", name: "comment", placeholder: "comment (optional)", "aria-label": "comment", spellcheck: "true" });
  const status = h("span", { class: "fb-status", role: "status" });
  const buttons = [1, 0].map((score) => {
    const button = h(
      "button",
      { type: "button", class: `fb-thumb fb-thumb-${score ? "up" : "down"}`, title: score ? "thumbs up (score 1)" : "thumbs down (score 0)" },
      score ? "▲ Good" : "▼ Bad",
    );
    button.addEventListener("click", async () => {
      for (const b of buttons) b.disabled = true;
      status.textContent = "saving…";
      const body = { run_id: run.id, trace_id: run.trace_id, key: THUMBS, score, feedback_source: { type: "app", metadata: { via: "otel-runs viewer" } } };
      if (crypto.randomUUID) body.id = crypto.randomUUID(); // absent off a secure context: the service makes one
      const text = comment.value.trim();
      if (text) body.comment = text;
      try {
        const item = await save(body);
        items = [...items, item];
        show(items);
        comment.value = "";
        status.textContent = "saved";
        if (added) added(item);
      } catch (error) {
        status.textContent = `not saved: ${cut(error.message, 300)}`;
      } finally {
        for (const b of buttons) b.disabled = false;
      }
    });
    return button;
  });
  block.appendChild(h("div", { class: "fb-form" }, comment, h("div", { class: "fb-actions" }, buttons, status)));
  return block;
}

// The trace header's summary: thumbs up and down, and the other keys with their counts.
export function summaryText(byRun) {
  const all = [...byRun.values()].flat();
  if (!all.length) return "none";
  const { up, down } = tally(all);
  const keys = new Map();
  for (const item of all) if (!isThumb(item)) keys.set(String(item.key), (keys.get(String(item.key)) || 0) + 1);
  const parts = [];
  if (up || down) parts.push(`▲ ${fmtInt(up)} ▼ ${fmtInt(down)}`);
  for (const [key, n] of keys) parts.push(`${cut(key, 60)} ×${fmtInt(n)}`);
  return parts.join(", ");
}
