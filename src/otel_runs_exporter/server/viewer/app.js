// The viewer's shell: routes (#/?filters, #/trace/ID, #/trace/ID/run/ID, #/threads, #/threads/KEY,
// #/projects/NAME), the key prompt,
// and the one poller every view's background requests go through.

import { ApiError, api, credentials, saveCredentials, shareToken, sharedSource } from "./api.js";
import { cut, h, isUuid, replace } from "./dom.js";
import { ListView } from "./list.js";
import { ProjectView } from "./charts.js";
import { ThreadView, ThreadsView } from "./threads.js";
import { TraceView } from "./trace.js";

const POLL_MS = 1000; // the floor between two background requests: at most one a second
const MAX_BACKOFF_MS = 60_000;

// Background requests (new traces, counts, open traces) run one per tick. On 429 the
// wait doubles (at least the Retry-After) and the page says so; any answer resets it.
class Poller {
  constructor(app) {
    this.app = app;
    this.delay = POLL_MS;
    this.timer = null;
    this.generation = 0;
  }

  restart() {
    clearTimeout(this.timer);
    this.generation += 1;
    this.delay = POLL_MS;
    this.schedule(POLL_MS, this.generation);
  }

  stop() {
    clearTimeout(this.timer);
    this.generation += 1;
  }

  schedule(ms, generation) {
    this.timer = setTimeout(() => this.tick(generation), ms);
  }

  // A view's own request failed: the next background request waits as long as the notice says
  // (it used to come at the next 1 s tick, one more request than the notice promised).
  backOff(error) {
    const generation = this.generation;
    this.delay = this.app.handleError(error, this.delay);
    if (generation !== this.generation) return; // the key prompt stopped polling
    clearTimeout(this.timer);
    this.generation += 1; // a tick in flight schedules nothing after it: one chain of ticks
    this.schedule(this.delay, this.generation);
  }

  async tick(generation) {
    if (generation !== this.generation) return;
    const view = this.app.view;
    if (document.hidden || !view || !view.pollJob) {
      this.schedule(POLL_MS, generation);
      return;
    }
    try {
      const job = view.pollJob();
      if (job) await job;
      if (this.delay !== POLL_MS) this.app.say("");
      this.delay = POLL_MS;
    } catch (error) {
      if (generation !== this.generation) return;
      this.delay = this.app.handleError(error, this.delay);
    }
    if (generation === this.generation) this.schedule(this.delay, generation);
  }
}

class App {
  constructor() {
    this.main = document.getElementById("main");
    this.notice = document.getElementById("notice");
    this.crumbs = document.getElementById("crumbs");
    this.view = null;
    this.poller = new Poller(this);
    this.locked = false;
    window.addEventListener("hashchange", () => this.route());
  }

  async start() {
    if (shareToken) {
      // A share link: the shared run names the one trace this page shows.
      try {
        this.sharedTrace = String((await sharedSource.sharedRun()).trace_id).toLowerCase();
      } catch (error) {
        this.say(`Cannot open the shared trace: ${error.message}`, "error");
        replace(this.main, h("p", { class: "empty" }, "This shared trace cannot be read: the link is wrong, or it was unshared."));
        return;
      }
      this.route();
      return;
    }
    // One request first, so a service with a key shows only the prompt, nothing of the runs.
    try {
      this.projects = await api.projects();
    } catch (error) {
      if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
        this.showKeyPrompt(error, credentials().key !== "");
        return;
      }
      this.say(`Cannot read projects: ${error.message}`, "error");
      this.projects = [];
    }
    this.locked = false;
    this.route();
  }

  route() {
    if (this.locked) return;
    const hash = location.hash || "#/";
    const [path, query] = hash.slice(1).split("?");
    const parts = path.split("/").filter(Boolean);
    if (this.sharedTrace && !(parts[0] === "trace" && String(parts[1]).toLowerCase() === this.sharedTrace)) {
      location.replace(`#/trace/${this.sharedTrace}`); // its hashchange routes to the shared trace
      return;
    }
    if (parts[0] === "trace" && isUuid(parts[1])) {
      const runId = parts[2] === "run" && isUuid(parts[3]) ? parts[3].toLowerCase() : null;
      const traceId = parts[1].toLowerCase();
      if (this.view instanceof TraceView && this.view.traceId === traceId) {
        this.view.select(runId);
        return;
      }
      // A share link's page reads the public routes and writes nothing.
      this.show(new TraceView(this, traceId, runId, this.sharedTrace ? { source: sharedSource, readOnly: true } : undefined));
      return;
    }
    const params = new URLSearchParams(query || "");
    if (parts[0] === "projects" && parts[1]) {
      let name = null;
      try {
        name = decodeURIComponent(parts.slice(1).join("/"));
      } catch {
        name = null;
      }
      if (name) {
        this.show(new ProjectView(this, name, params));
        return;
      }
    }
    if (parts[0] === "threads") {
      let key = null;
      try {
        key = parts.length > 1 ? decodeURIComponent(parts.slice(1).join("/")) : null;
      } catch {
        key = null; // a malformed escape: the project's threads instead
      }
      this.show(key ? new ThreadView(this, key, params) : new ThreadsView(this, params));
      return;
    }
    if (this.view instanceof ListView && this.view.sameFilters(params)) return;
    this.show(new ListView(this, params));
  }

  show(view) {
    if (this.view && this.view.close) this.view.close();
    this.view = view;
    replace(this.main, view.element);
    this.poller.restart();
    view.open();
  }

  setCrumbs(...items) {
    const shown = items.filter(Boolean);
    replace(this.crumbs, shown.map((item, i) => [i ? h("span", { class: "sep" }, "/") : null, item]));
  }

  say(text, kind = "info") {
    this.notice.className = text ? `notice notice-${kind}` : "notice";
    this.notice.textContent = cut(text, 500); // service messages can quote what a run sent
  }

  // A view's request failed: say so, and the poller waits as the notice says.
  failed(error) {
    this.poller.backOff(error);
  }

  // What a failed request means for the page; returns the wait before the next background request.
  handleError(error, delay) {
    if (!(error instanceof ApiError)) {
      this.say(`The viewer failed: ${error.message}`, "error");
      return Math.min(MAX_BACKOFF_MS, delay * 2);
    }
    if (error.status === 401 || error.status === 403) {
      this.showKeyPrompt(error, true);
      return MAX_BACKOFF_MS;
    }
    if (error.status === 429) {
      const next = Math.min(MAX_BACKOFF_MS, Math.max(delay * 2, (error.retryAfter || 0) * 1000));
      this.say(
        `The service is rate limiting this page (429); it waits ${Math.ceil(next / 1000)} s before asking again.`,
        "warn",
      );
      return next;
    }
    const next = Math.min(MAX_BACKOFF_MS, delay * 2);
    this.say(`${error.message} (trying again in ${Math.ceil(next / 1000)} s)`, "error");
    return next;
  }

  showKeyPrompt(error, refused) {
    this.locked = true;
    this.poller.stop();
    if (this.view && this.view.close) this.view.close();
    this.view = null;
    this.setCrumbs();
    this.say("");
    const saved = credentials();
    const keyInput = h("input", { type: "password", id: "api-key", name: "api-key", autocomplete: "off", spellcheck: "false" });
    const tenantInput = h("input", { type: "text", id: "tenant-id", name: "tenant-id", autocomplete: "off", spellcheck: "false" });
    tenantInput.value = saved.tenant;
    // A 403 is the workspace, which the first prompt cannot guess: say so even before a first try.
    const workspace = error.status === 403;
    keyInput.value = workspace ? saved.key : ""; // the key was fine; only the workspace was not
    let message = "";
    if (refused && !workspace) {
      message = `The service refused this API key (${error.message}). Enter the key otel-runs serve was started with.`;
    } else if (workspace) {
      message = `The service refused the workspace (${error.message}). Enter the workspace id otel-runs serve was started with (--workspace-id).`;
    }
    const form = h(
      "form",
      { class: "keyform", autocomplete: "off" },
      h("h1", null, workspace ? "This service needs a workspace id" : "This service needs an API key"),
      h(
        "p",
        null,
        "It was started with --api-key (or OTEL_RUNS_SERVER_API_KEY) or --workspace-id. What you enter is kept in " +
          "this tab's session storage and sent as the x-api-key and x-tenant-id headers; it never goes into the address.",
      ),
      h("label", { for: "api-key" }, "API key"),
      keyInput,
      h("label", { for: "tenant-id" }, "Workspace id (x-tenant-id; only when the service was started with --workspace-id)"),
      tenantInput,
      h("button", { type: "submit" }, "Show the traces"),
      message ? h("p", { class: "keyerror", role: "alert" }, message) : null,
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      saveCredentials(keyInput.value.trim(), tenantInput.value.trim());
      replace(this.main, h("p", { class: "loading" }, "Checking the key…"));
      this.start();
    });
    replace(this.main, form);
    (workspace ? tenantInput : keyInput).focus();
  }
}

new App().start();
