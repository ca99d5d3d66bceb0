// Chat messages as a chat: a role label per message, text as text, an assistant's tool call as
// get_weather({"city": "Paris"}) with the tool's result beside the call it answers, images as images.
//
// Messages are read where the common clients put them (a list of messages; messages / input / output /
// prompt keys; OpenAI's choices[].message) and in the shapes they write: OpenAI (tool_calls, role "tool"
// with tool_call_id), Anthropic (tool_use and tool_result blocks), LangChain (type "human"/"ai"/"tool",
// tool_calls with args), the OTel GenAI conventions (parts: text, tool_call, tool_call_response, blob, uri).
// A part that is none of these is shown as a value (values.js), never dropped and never markup.

import { clipped, cut, fmtInt, h, isolated } from "./dom.js";
import { imagePart, mediaView } from "./media.js";
import { foldedText, isObject, jsonText, plainView, settle } from "./values.js";

const ROLES = new Set(["system", "developer", "user", "human", "assistant", "ai", "tool", "function", "chat", "model"]);
const TEXT_PARTS = new Set(["text", "input_text", "output_text"]);
const KEEP_FIRST = 1; // messages shown before the fold of a long conversation
const KEEP_LAST = 3; // and after it
const FOLD_ABOVE = KEEP_FIRST + KEEP_LAST + 1;
const MESSAGES_A_PAGE = 200; // folded messages built at a click
const ARGS_INLINE_AT = 100; // characters of a call's arguments written on its line; longer ones are indented JSON
const ARGS_LINES = 4; // lines of a long call's arguments shown before "show more"
const RESULT_LINES = 4;
const SYSTEM_LINES = 4;

export function roleOf(message) {
  const role = typeof message.role === "string" ? message.role : typeof message.type === "string" ? message.type : "";
  return ROLES.has(role.toLowerCase()) ? role.toLowerCase() : "";
}

function isMessage(value) {
  if (!isObject(value)) return false;
  return Boolean(roleOf(value)) && ("content" in value || "parts" in value || "tool_calls" in value || "text" in value);
}

function messageList(value) {
  if (!Array.isArray(value) || !value.length) return null;
  // LangChain writes a batch of conversations: [[...messages]]; one of them is the usual case.
  const flat = value.length === 1 && Array.isArray(value[0]) ? value[0] : value;
  return flat.length && flat.every(isMessage) ? flat : null;
}

// Chat messages wherever the common clients put them, and the value's other keys: {messages, rest} or null.
export function findConversation(value) {
  const direct = messageList(value);
  if (direct) return { messages: direct, rest: null };
  if (!isObject(value)) return null;
  for (const key of ["messages", "input", "inputs", "output", "outputs", "prompt", "prompts"]) {
    const list = messageList(value[key]) || (isMessage(value[key]) ? [value[key]] : null);
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

function str(value) {
  return typeof value === "string" ? value : "";
}

function contentOf(message) {
  return "content" in message ? message.content : "parts" in message ? message.parts : message.text;
}

// The calls a message makes in its tool_calls (OpenAI's, LangChain's): [{id, name, args}].
function fieldCalls(message) {
  if (!Array.isArray(message.tool_calls)) return [];
  return message.tool_calls.filter(isObject).map((call) => {
    const fn = isObject(call.function) ? call.function : call;
    return { id: str(call.id), name: str(fn.name) || "(unnamed tool)", args: "arguments" in fn ? fn.arguments : fn.args };
  });
}

const CALL_PARTS = new Set(["tool_use", "tool_call", "function_call"]);
const RESULT_PARTS = new Set(["tool_result", "tool_call_response", "function_call_output"]);

function partCall(part) {
  return { id: str(part.id) || str(part.call_id), name: str(part.name) || "(unnamed tool)", args: part.input ?? part.arguments ?? part.args };
}

// Every call a message makes: its tool_calls and its tool_use / tool_call parts.
function callsOf(message) {
  const content = contentOf(message);
  const parts = Array.isArray(content) ? content.filter((p) => isObject(p) && CALL_PARTS.has(p.type)).map(partCall) : [];
  return [...fieldCalls(message), ...parts];
}

// The results a message carries: [{id, value, whole}] from a tool message (whole: the message is the result)
// or its tool_result / tool_call_response parts.
function resultsOf(message) {
  const role = roleOf(message);
  if (role === "tool" || role === "function") {
    return [{ id: str(message.tool_call_id) || str(message.tool_use_id), value: contentOf(message), whole: true }];
  }
  const content = contentOf(message);
  if (!Array.isArray(content)) return [];
  return content
    .filter((part) => isObject(part) && RESULT_PARTS.has(part.type))
    .map((part) => ({ id: str(part.tool_use_id) || str(part.id) || str(part.call_id), value: part.content ?? part.response ?? part.result ?? part.output }));
}

// A conversation: each message with its role, a tool result drawn under the call it answers. A long one
// shows its first message and its last ones; the ones between are built when asked for, a page at a time,
// so a run of 10,000 messages costs the page what one of five does.
export function conversationView(messages) {
  const calls = new Set(messages.flatMap((m) => callsOf(m).map((c) => c.id)).filter(Boolean));
  const answers = new Map();
  for (const message of messages) {
    for (const result of resultsOf(message)) if (result.id && calls.has(result.id) && !answers.has(result.id)) answers.set(result.id, result);
  }
  const placed = new Set([...answers.values()]);
  const views = (list) => list.map((message) => messageView(message, answers, placed)).filter(Boolean);
  const box = h("div", { class: "conversation" });
  if (messages.length <= FOLD_ABOVE) {
    box.append(...views(messages));
    return box;
  }
  const between = messages.slice(KEEP_FIRST, messages.length - KEEP_LAST);
  const fold = (from) => {
    const left = between.length - from;
    const more = h("button", { type: "button", class: "earlier" }, `▸ ${fmtInt(left)} earlier message${left === 1 ? "" : "s"}`);
    more.addEventListener("click", (event) => {
      event.preventDefault();
      const next = from + MESSAGES_A_PAGE;
      more.replaceWith(...views(between.slice(from, next)), ...(next < between.length ? [fold(next)] : []));
      settle(box);
    });
    return more;
  };
  box.append(...views(messages.slice(0, KEEP_FIRST)), fold(0), ...views(messages.slice(messages.length - KEEP_LAST)));
  return box;
}

// Keys of a message that are drawn already, or the client's own bookkeeping.
const MESSAGE_KEYS = new Set([
  "role", "type", "content", "parts", "text", "tool_calls", "tool_call_id", "tool_use_id", "id", "additional_kwargs",
  "response_metadata", "usage_metadata", "invalid_tool_calls", "example",
]);

function messageView(message, answers, placed) {
  const role = roleOf(message);
  const content = contentOf(message);
  const body = [];
  const [result] = resultsOf(message);
  if (result && result.whole) {
    // A tool's message: drawn under the call it answers when that call is in the conversation.
    if (placed.has(answers.get(result.id))) return null;
    body.push(resultValue(result.value));
  } else {
    const lines = role === "system" || role === "developer" ? SYSTEM_LINES : undefined;
    if (typeof content === "string") {
      if (content) body.push(foldedText(content, { lines, cls: "content" }));
    } else if (Array.isArray(content)) {
      for (const part of content) {
        const shown = partView(part, answers, placed, lines);
        if (shown) body.push(shown);
      }
    } else if (content !== undefined && content !== null) {
      body.push(plainView(content, 1));
    }
    for (const call of fieldCalls(message)) body.push(callView(call, answers.get(call.id)));
  }
  // What else the message carries (a name, a refusal, an audio id): small, after its text.
  const rest = Object.fromEntries(
    Object.entries(message).filter(([k, v]) => !MESSAGE_KEYS.has(k) && v !== null && v !== undefined && !(isObject(v) && !Object.keys(v).length) && !(Array.isArray(v) && !v.length)),
  );
  if (Object.keys(rest).length) body.push(h("div", { class: "msg-rest" }, plainView(rest, 1)));
  if (!body.length) {
    // Only results, each drawn under its call (Anthropic sends them as a user message): nothing left to say.
    if (Array.isArray(content) && content.length && content.every((p) => isObject(p) && RESULT_PARTS.has(p.type))) return null;
    body.push(h("span", { class: "none" }, "(empty)"));
  }
  const label = role === "tool" || role === "function" ? "tool" : role || "message";
  const title = result && result.whole && result.id ? `result of call ${cut(result.id, 100)}` : undefined;
  return h("div", { class: `message role-${role || "other"}`, title }, h("div", { class: "role" }, label), body);
}

function partView(part, answers, placed, lines) {
  if (typeof part === "string") return foldedText(part, { lines, cls: "content" });
  if (!isObject(part)) return plainView(part, 1);
  const type = str(part.type);
  if (TEXT_PARTS.has(type) && typeof (part.text ?? part.content) === "string") {
    return foldedText(part.text ?? part.content, { lines, cls: "content" });
  }
  if (CALL_PARTS.has(type)) {
    const call = partCall(part);
    return callView(call, answers.get(call.id));
  }
  if (RESULT_PARTS.has(type)) {
    const id = str(part.tool_use_id) || str(part.id) || str(part.call_id);
    const answer = answers.get(id);
    if (answer && placed.has(answer)) return null; // drawn under its call
    return h("div", { class: "tool-result orphan" }, h("span", { class: "label" }, `result of ${cut(id || "a call", 60)}`),
      resultValue(part.content ?? part.response ?? part.result ?? part.output));
  }
  const image = imagePart(part);
  if (image) return mediaView(image);
  if (type === "thinking" || type === "reasoning") {
    const text = str(part.thinking) || str(part.text) || str(part.content);
    return h("details", { class: "thinking" }, h("summary", null, "thinking"), text ? foldedText(text) : plainView(part, 1));
  }
  return h("div", { class: "part-other" }, plainView(part, 0)); // a part this page does not know: all of it, as values
}

// name(arguments): the arguments as compact JSON on the line when short, indented and folded when long,
// as their text when they are not JSON (a model can write anything there).
function callView(call, answer) {
  let args = call.args;
  let notJson = false;
  if (typeof args === "string") {
    try {
      args = args.trim() ? JSON.parse(args) : {};
    } catch {
      notJson = true;
    }
  }
  const compact = notJson ? String(args) : jsonText(args ?? {}, 0);
  const head = h("span", { class: "fn" }, isolated(cut(call.name, 200)));
  let line;
  if (!notJson && compact.length <= ARGS_INLINE_AT) {
    line = h("div", { class: "call-line" }, head, h("span", { class: "args" }, "(", clipped(compact, { limit: ARGS_INLINE_AT }), ")"));
  } else {
    const text = notJson ? compact : jsonText(args);
    line = h(
      "div",
      { class: "call-block" },
      h("div", { class: "call-line" }, head, "(", notJson ? h("span", { class: "note" }, " arguments that are not JSON:") : null),
      foldedText(text, { lines: ARGS_LINES, cls: "args" }),
      h("div", { class: "call-close" }, ")"),
    );
  }
  const parts = [line];
  if (answer) parts.push(h("div", { class: "tool-result" }, h("span", { class: "label" }, "→ "), resultValue(answer.value)));
  return h("div", { class: "tool-call", title: call.id ? `call ${cut(call.id, 100)}` : undefined }, parts);
}

// A tool's result: its text (JSON written as text is shown as JSON), or its parts, or its value.
function resultValue(value) {
  if (typeof value === "string") {
    const trimmed = value.trim();
    if ((trimmed.startsWith("{") || trimmed.startsWith("[")) && trimmed.length <= ARGS_INLINE_AT * 100) {
      try {
        const parsed = JSON.parse(trimmed);
        const compact = jsonText(parsed, 0);
        return compact.length <= ARGS_INLINE_AT ? h("span", { class: "args" }, compact) : foldedText(jsonText(parsed), { lines: RESULT_LINES, cls: "args" });
      } catch {
        // text that only looks like JSON
      }
    }
    return foldedText(value, { lines: RESULT_LINES, cls: "content" });
  }
  if (Array.isArray(value)) {
    return h("div", null, value.map((part) => (isObject(part) && TEXT_PARTS.has(str(part.type)) ? resultValue(str(part.text)) : partView(part, new Map(), new Set(), RESULT_LINES))));
  }
  if (value === undefined) return h("span", { class: "none" }, "(no result)");
  return plainView(value, 1);
}
