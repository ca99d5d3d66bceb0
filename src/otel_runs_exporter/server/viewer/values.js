// A run's values that are not a conversation, as a person reads them: keys and values in rows, strings as
// text, nested objects unfolded two levels (deeper ones a click away), documents as a numbered list, images
// as images (media.js), and long text folded after a few lines with a button for the rest.
//
// Bounded in the page whatever a run holds: a string is shown to STRING_AT characters (a button shows the
// rest), a level to ENTRIES_AT entries, and a value over TRUNCATE_AT characters of JSON (its images and base64
// counted as a few characters each) as the first TRUNCATE_AT characters of its text.

import { append, clipped, fmtBytes, fmtInt, h, replace } from "./dom.js";
import { imagePart, mediaOf, mediaView } from "./media.js";

export const TRUNCATE_AT = 100 * 1024; // characters of JSON; larger values show this much and a "show all"
export const STRING_AT = 10 * 1024; // characters of one string (a long prompt shows whole)
const ENTRIES_AT = 200; // entries of one object or list shown before a "show all"
const OPEN_LEVELS = 2; // levels unfolded at first
const INLINE_AT = 80; // characters of a list of plain values written on one line
const TEXT_LINES = 8; // lines of a string shown before "show more"

export function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

// JSON text of a value with its media cut to a word: what its size is measured by, and what a
// truncated value shows (base64 never shown as text).
export function jsonText(value, indent = 2) {
  try {
    return JSON.stringify(value, (key, v) => {
      if (typeof v !== "string") return v;
      const media = v.length > 300 ? mediaOf(v) : null;
      return media ? `[${media.mime || "base64 data"}, ${fmtBytes(media.size)}]` : v;
    }, indent) ?? String(value);
  } catch {
    return String(value);
  }
}

// Text folded after `lines` lines (a "show more" appears when settle() finds it taller); `cls` for its style.
export function foldedText(text, { lines = TEXT_LINES, cls = "text", tag = "div" } = {}) {
  const el = clipped(text, { limit: STRING_AT, tag, cls: `${cls} fold` });
  el.style.setProperty("--lines", String(lines));
  return el;
}

// After a view is in the page: each folded block taller than its lines gets a button that unfolds it.
// One not drawn yet (in a closed <details>, an unfolded part) is left for a later call.
export function settle(root) {
  for (const el of root.querySelectorAll(".fold:not([data-settled])")) {
    if (!el.getClientRects().length) continue;
    el.dataset.settled = "true";
    if (el.scrollHeight <= el.clientHeight + 2) {
      el.classList.add("fold-fits");
      continue;
    }
    const more = h("button", { type: "button", class: "show-more" }, "show more");
    more.addEventListener("click", (event) => {
      event.preventDefault();
      el.classList.add("fold-open");
      more.remove();
    });
    el.after(more);
  }
}

// A value as the run's page shows it: rows of keys and values, a string as text, documents as a list;
// `depth` 1 unfolds one level less (what a conversation's value carries besides its messages).
export function valueView(value, depth = 0) {
  if (value === undefined || value === null) return h("p", { class: "none" }, "none");
  const text = jsonText(value);
  if (text.length > TRUNCATE_AT) return truncated(text);
  return plainView(value, depth);
}

function truncated(text) {
  const holder = h("div", { class: "truncated" });
  const button = h("button", { type: "button", class: "show-all" }, `show all (${fmtBytes(text.length)})`);
  button.addEventListener("click", () => replace(holder, h("pre", { class: "json-text" }, text)));
  return replace(
    holder,
    h("p", { class: "note" }, `Shown truncated: the first ${fmtBytes(TRUNCATE_AT)} of ${fmtBytes(text.length)}.`),
    foldedPre(text.slice(0, TRUNCATE_AT) + "\n…"),
    button,
  );
}

// Text in a <pre> folded after a dozen lines ("show more" opens it): what comes after it stays in view.
function foldedPre(text) {
  const pre = h("pre", { class: "json-text fold" }, text);
  pre.style.setProperty("--lines", "12");
  return pre;
}

// One value at `depth`: what the tree and the messages (an unknown part, a tool's result) draw.
export function plainView(value, depth) {
  if (value === null) return h("span", { class: "j-null" }, "null");
  if (typeof value === "string") {
    const media = mediaOf(value);
    if (media) return mediaView(media);
    return value.includes("\n") || value.length > INLINE_AT ? foldedText(value, { cls: "j-str text" }) : clipped(value, { cls: "j-str" });
  }
  if (typeof value === "number" || typeof value === "bigint") return h("span", { class: "j-num" }, String(value));
  if (typeof value === "boolean") return h("span", { class: "j-bool" }, String(value));
  if (typeof value !== "object") return h("span", null, String(value));
  const image = imagePart(value);
  if (image) return mediaView(image);
  const docs = documents(value);
  if (docs) return documentsView(docs);
  if (Array.isArray(value) && isShortList(value)) return h("span", { class: "j-list" }, inlineText(value));
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  if (!entries.length) return h("span", { class: "j-empty" }, Array.isArray(value) ? "[]" : "{}");
  if (depth >= OPEN_LEVELS) return foldedTree(value, entries, depth);
  return rows(entries, depth);
}

function isShortList(list) {
  return list.every((v) => v === null || ["string", "number", "boolean"].includes(typeof v)) && inlineText(list).length <= INLINE_AT;
}

function inlineText(list) {
  return list.map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join(", ");
}

function rows(entries, depth) {
  const list = h("div", { class: "kvtree" });
  const add = (part) =>
    append(
      list,
      part.map(([key, child]) =>
        h(
          "div",
          { class: "kvrow" },
          h("div", { class: "k" }, clipped(String(key), { limit: 200 }), h("span", { class: "colon" }, ": ")),
          h("div", { class: "v" }, plainView(child, depth + 1)),
        ),
      ),
    );
  add(entries.slice(0, ENTRIES_AT));
  if (entries.length > ENTRIES_AT) {
    const more = h("button", { type: "button", class: "show-all" }, `show all ${fmtInt(entries.length)}`);
    more.addEventListener("click", () => {
      more.remove();
      add(entries.slice(ENTRIES_AT));
    });
    list.appendChild(more);
  }
  return list;
}

// A level past the first two: its size on a line, built when unfolded.
function foldedTree(value, entries, depth) {
  const count = Array.isArray(value) ? `${fmtInt(entries.length)} item${entries.length === 1 ? "" : "s"}` : `${fmtInt(entries.length)} key${entries.length === 1 ? "" : "s"}`;
  const details = h("details", { class: "json" }, h("summary", null, Array.isArray(value) ? `[ ${count} ]` : `{ ${count} }`));
  details.addEventListener("toggle", () => {
    if (details.open && details.childNodes.length === 1) details.appendChild(rows(entries, depth));
  });
  return details;
}

// A list of documents (a retriever's): LangChain's {page_content, metadata}, or {content|text, metadata, score}.
function documents(value) {
  const list = Array.isArray(value) ? value : isObject(value) && Object.keys(value).length === 1 && Array.isArray(value.documents) ? value.documents : null;
  if (!list || !list.length) return null;
  const isDoc = (d) => isObject(d) && (typeof d.page_content === "string" || ((typeof d.content === "string" || typeof d.text === "string") && isObject(d.metadata)));
  return list.every(isDoc) ? list : null;
}

function documentsView(docs) {
  const items = docs.slice(0, ENTRIES_AT).map((doc, i) => {
    const text = doc.page_content ?? doc.content ?? doc.text;
    const meta = isObject(doc.metadata) ? { ...doc.metadata } : null;
    const source = meta && meta.source !== undefined ? meta.source : undefined;
    if (meta) delete meta.source; // said in the document's heading
    const rest = Object.fromEntries(Object.entries(doc).filter(([k]) => !["page_content", "content", "text", "metadata", "type"].includes(k)));
    return h(
      "li",
      { class: "doc" },
      h("div", { class: "doc-head" }, `document ${i + 1}`, source !== undefined ? h("span", { class: "doc-source" }, " · ", clipped(String(source), { limit: 200 })) : null),
      foldedText(text, { lines: 4 }),
      meta && Object.keys(meta).length ? plainView(meta, OPEN_LEVELS - 1) : null,
      Object.keys(rest).length ? plainView(rest, OPEN_LEVELS - 1) : null,
    );
  });
  const note = docs.length > ENTRIES_AT ? h("p", { class: "note" }, `The first ${ENTRIES_AT} of ${fmtInt(docs.length)} documents.`) : null;
  return h("div", null, h("ol", { class: "documents" }, items), note);
}

// A long text (an error's traceback) in a <pre>, its first TRUNCATE_AT characters and a button for the rest.
export function bigText(text, kind) {
  if (text.length <= TRUNCATE_AT) return h("pre", { class: kind }, text);
  const holder = h("div", { class: "truncated" });
  const button = h("button", { type: "button", class: "show-all" }, `show all (${fmtBytes(text.length)})`);
  button.addEventListener("click", () => replace(holder, h("pre", { class: kind }, text)));
  replace(holder, h("pre", { class: kind }, text.slice(0, TRUNCATE_AT), "\n…"), button);
  return holder;
}
