// Building the page, and the small formatting rules every view shares.
//
// Run contents are untrusted (model output, user input). Every element here is
// made by h(): strings become text nodes and attributes come from a fixed list,
// so a value can only ever be shown as text; nothing in the viewer assigns HTML.

const ATTRIBUTES = new Set([
  "class", "title", "type", "placeholder", "name", "for", "role", "tabindex", "autocomplete",
  "aria-label", "aria-expanded", "aria-live", "aria-selected", "spellcheck", "id", "value", "hidden",
]);

export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) {
      el.addEventListener(key.slice(2), value);
    } else if (key === "href") {
      // Callers pass only links they built themselves from checked ids (see link()).
      el.setAttribute("href", value);
    } else if (key.startsWith("data-") || ATTRIBUTES.has(key)) {
      el.setAttribute(key, value === true ? "" : String(value));
    } else {
      throw new Error(`h(): attribute ${key} is not on the list`);
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value) {
  return typeof value === "string" && UUID.test(value);
}

// A run's values are untrusted in size too: an 18.9 MB dotted_order put whole into one
// node took the renderer to 1.55 GB and 34 s. Every string a view shows goes through
// clipped() (with a button for the rest) or cut() (where a button has no room).
export const CLIP_AT = 1000; // characters of one value: a name, an id, a tag, a dotted_order

// Bidi controls in a stored value (U+202A-202E, U+2066-2069) would reorder the viewer's own text
// beside it: a right-to-left override in a feedback key showed the count ×12 as "21×" and a score
// 0.25 as "52.0". Such a value is shown inside a first-strong isolate, which ends whatever it opened.
const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069]/;

export function isolated(text) {
  return BIDI_CONTROLS.test(text) ? `\u2068${text}\u2069` : text;
}

// A long value as its first `limit` characters and a "show all" button for the rest.
export function clipped(value, { limit = CLIP_AT, tag = "span", cls } = {}) {
  const text = isolated(String(value));
  if (text.length <= limit) return h(tag, { class: cls }, text);
  const el = h(tag, { class: cls ? `${cls} clipped` : "clipped" });
  const more = h("button", { type: "button", class: "show-all", title: `${fmtInt(text.length)} characters` }, `show all (${fmtBytes(text.length)})`);
  more.addEventListener("click", (event) => {
    event.preventDefault();
    event.stopPropagation();
    replace(el, text);
  });
  return replace(el, text.slice(0, limit), "… ", more);
}

// The first `limit` characters and how many there were: for a tree row, a title, a crumb.
export function cut(value, limit = 200) {
  const text = String(value);
  return text.length <= limit ? isolated(text) : `${isolated(text.slice(0, limit))}… (${fmtInt(text.length)} characters)`;
}

// Deep links are hash routes, so they paste into any browser that reaches the service.
export function link(traceId, runId) {
  if (!isUuid(traceId)) return "#/";
  return isUuid(runId) ? `#/trace/${traceId}/run/${runId}` : `#/trace/${traceId}`;
}

const ISO = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:?\d\d)?$/;

// Milliseconds since the epoch, keeping the microseconds runs carry (Date.parse drops them).
export function parseTime(value) {
  if (typeof value !== "string") return NaN;
  const m = ISO.exec(value.trim());
  if (!m) return NaN;
  const frac = (m[2] || "").padEnd(6, "0");
  const whole = Date.parse(`${m[1]}.${frac.slice(0, 3)}${m[3] || "Z"}`);
  return whole + Number(frac.slice(3, 6)) / 1000;
}

export function fmtDuration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return "";
  if (ms < 1) return `${(ms * 1000).toFixed(0)} µs`;
  if (ms < 1000) return `${ms < 10 ? ms.toFixed(1) : ms.toFixed(0)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(2)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes}m ${String(Math.round((ms % 60_000) / 1000)).padStart(2, "0")}s`;
}

const pad = (n, w = 2) => String(n).padStart(w, "0");

export function fmtTime(ms) {
  if (!Number.isFinite(ms)) return "";
  const d = new Date(ms);
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`
  );
}

// The same 24-hour clock as fmtTime, shorter, for a chart's axis: "14:05", or "03-01 14:00" where days change.
export function fmtClock(ms, withDate = false) {
  if (!Number.isFinite(ms)) return "";
  const d = new Date(ms);
  const clock = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  return withDate ? `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clock}` : clock;
}

export function fmtInt(n) {
  return Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "";
}

// A cost in US dollars; null (a model the price table does not have) is "no price", never $0.
export function fmtCost(usd) {
  const n = usd === null || usd === undefined ? NaN : Number(usd);
  if (!Number.isFinite(n)) return "no price";
  if (n === 0) return "$0";
  if (n < 0.000001) return "<$0.000001";
  if (n < 0.01) return `$${n.toPrecision(2)}`;
  return `$${n.toFixed(n < 1 ? 4 : 2)}`;
}

export function fmtBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

// The service's run status (success / error / pending) in the viewer's words.
export function statusOf(run) {
  if (run.status === "error" || (run.error !== undefined && run.error !== null)) return "error";
  if (run.status === "success" || (run.end_time !== undefined && run.end_time !== null)) return "ok";
  return "open";
}

export function statusBadge(status) {
  return h("span", { class: `status status-${status}`, title: STATUS_TITLES[status] }, status);
}

const STATUS_TITLES = {
  ok: "finished without an error",
  error: "finished with an error",
  open: "no end time yet: still running, or its end never arrived",
};

export function typeBadge(runType) {
  const kind = cut(typeof runType === "string" && runType ? runType : "chain", 40);
  return h("span", { class: `rtype rtype-${KNOWN_TYPES.has(kind) ? kind : "other"}`, title: `run type: ${kind}` }, kind);
}

const KNOWN_TYPES = new Set(["chain", "llm", "tool", "retriever", "embedding", "prompt", "parser"]);

// An image drawn from a data: URL the caller checked (media.js): the one place a run's value becomes an
// address, and only a raster image's, which the page's CSP (img-src 'self' data:) lets through and nothing else.
const RASTER_URL = /^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]*={0,2}$/;

export function dataImage(url, alt, cls) {
  if (typeof url !== "string" || !RASTER_URL.test(url)) throw new Error("dataImage(): not a raster data: URL");
  const img = h("img", { class: cls, title: alt });
  img.alt = alt;
  img.decoding = "async";
  img.src = url;
  return img;
}

// A copy button for an id; clipboard access needs a secure context, which loopback is.
export function copyButton(value, label) {
  const button = h("button", { type: "button", class: "copy", title: `copy ${label}` }, "copy");
  button.addEventListener("click", async (event) => {
    event.preventDefault();
    event.stopPropagation();
    try {
      await navigator.clipboard.writeText(value);
      button.textContent = "copied";
    } catch {
      button.textContent = "select it";
    }
    setTimeout(() => (button.textContent = "copy"), 1500);
  });
  return button;
}
