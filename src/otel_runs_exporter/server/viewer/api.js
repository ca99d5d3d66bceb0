// The viewer's only way to the service: the SDK's own endpoints (reads, and feedback its
// user adds), with the key from session storage, and errors that say what to do.

const KEY = "otel-runs.api-key";
const TENANT = "otel-runs.tenant-id";

// A share link (/public/TOKEN/r, what the SDK's share_run returns) opens the page read-only: its reads go to the
// shared trace's public routes, with the token in the path and no key.
const SHARE_PATH = /^\/public\/([0-9A-Fa-f-]{32,36})\/r$/.exec(location.pathname);
export const shareToken = SHARE_PATH ? SHARE_PATH[1] : null;

export class ApiError extends Error {
  constructor(status, message, retryAfter) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

// Kept in sessionStorage: gone when the tab closes, never in the URL or a cookie.
export function credentials() {
  return { key: sessionStorage.getItem(KEY) || "", tenant: sessionStorage.getItem(TENANT) || "" };
}

export function saveCredentials(key, tenant) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
  if (tenant) sessionStorage.setItem(TENANT, tenant);
  else sessionStorage.removeItem(TENANT);
}

function detailText(body) {
  const detail = body && body.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) return detail.map((d) => (d && typeof d.msg === "string" ? d.msg : JSON.stringify(d))).join("; ");
  return "";
}

async function request(method, path, body) {
  const headers = { Accept: "application/json" };
  const { key, tenant } = shareToken ? { key: "", tenant: "" } : credentials();
  if (key) headers["x-api-key"] = key;
  if (tenant) headers["x-tenant-id"] = tenant;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
    });
  } catch {
    throw new ApiError(0, "the service did not answer: is otel-runs serve still running?");
  }
  let parsed = null;
  try {
    parsed = await response.json();
  } catch {
    parsed = null;
  }
  if (!response.ok) {
    const seconds = Number(response.headers.get("Retry-After"));
    const text = detailText(parsed) || response.statusText || "error";
    throw new ApiError(response.status, `${response.status}: ${text}`, Number.isFinite(seconds) ? seconds : null);
  }
  return parsed;
}

export const api = {
  // GET /sessions: the SDK's list_projects; with stats, to sort by the latest run.
  projects: () => request("GET", "/sessions?include_stats=true&limit=100"),
  // POST /runs/query: the SDK's list_runs; one page ({runs, cursors: {next}}).
  query: (body) => request("POST", "/runs/query", body),
  // POST /runs/stats: the SDK's get_run_stats (run_count, total_tokens, ...).
  stats: (body) => request("POST", "/runs/stats", body),
  // POST /runs/charts: a project's traffic over time, computed by the service (runs, errors, latency, tokens, cost).
  charts: (body) => request("POST", "/runs/charts", body),
  // GET /runs/{id}: the SDK's read_run.
  run: (id) => request("GET", `/runs/${encodeURIComponent(id)}`),
  // GET /runs/changes: the viewer's own long poll, a trace's runs stored or changed after a cursor.
  changes: (query) => request("GET", `/runs/changes?${query}`),
  // GET /runs/{id}/violations: rule violations the service recorded for the run (and stored it despite).
  violations: (id) => request("GET", `/runs/${encodeURIComponent(id)}/violations`),
  // GET /feedback: the SDK's list_feedback; `query` names runs (run=) or a trace (trace=), 100 a page (offset=).
  feedback: (query) => request("GET", `/feedback?${query}`),
  // POST /feedback: the SDK's create_feedback; the page's one write (a thumbs up or down, a comment).
  addFeedback: (body) => request("POST", "/feedback", body),
  // POST /api/v2/threads/query: the SDK's client.threads.query; one page ({items, next_cursor}).
  threads: (body) => request("POST", "/api/v2/threads/query", body),
  // GET /api/v2/threads/{id}/traces: the SDK's client.threads.list_traces; `query` is the query string.
  threadTraces: (id, query) => request("GET", `/api/v2/threads/${encodeURIComponent(id)}/traces?${query}`),
};

// The shared page's source (TraceView's and RunView's `source`, with readOnly): the same answers, narrowed by
// the service to the shared trace. It has no feedback, violations or changes feed, so the views read none and
// draw none, and nothing to write with.
export const sharedSource = {
  // GET /public/{token}/run: the shared run, whose trace the page opens.
  sharedRun: () => request("GET", `/public/${shareToken}/run`),
  // POST /public/{token}/runs/query: a page of the trace's runs, as /runs/query answers it.
  query: (body) => request("POST", `/public/${shareToken}/runs/query`, body),
  // POST /public/{token}/runs/stats: the trace's counts, as /runs/stats answers them.
  stats: (body) => request("POST", `/public/${shareToken}/runs/stats`, body),
  // GET /public/{token}/run/{id}: one run of the trace.
  run: (id) => request("GET", `/public/${shareToken}/run/${encodeURIComponent(id)}`),
};

// JSON string literal for the filter language the query endpoint takes.
export function quote(text) {
  return JSON.stringify(String(text));
}
