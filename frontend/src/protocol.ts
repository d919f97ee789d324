// Browser <-> web WebSocket protocol (docs/protocol.md). Pure: no DOM, no globals.

// The frames themselves are generated from the server's pydantic schemas
// (chatapp/realtime/schemas.py) into ./generated/frames.ts: `python -m chatapp.realtime.golden`
// (or `make protocol`) after a schema change. Nothing here repeats a field list.
import type * as Wire from "./generated/frames.ts";
export type {
  AcceptedFrame,
  ClientFrame,
  ClientFrameType,
  ClientTimingFrame,
  ConversationMessage,
  DeltaFrame,
  DoneFrame,
  EditFrame,
  ErrorCode,
  FeedbackFrame,
  FeedbackRecordedFrame,
  AgentTypingFrame,
  HandoffStateFrame,
  HumanMessageFrame,
  RegenerateFrame,
  ResumeFrame,
  SendFrame,
  ServerFrameType,
  SnapshotFrame,
  StopFrame,
  SuggestedEntry,
  TemplateRef,
  Timings,
  Usage,
} from "./generated/frames.ts";

export type MessageStatus = "streaming" | "complete" | "stopped" | "failed";

/** Where an answer came from: the model, or an admin-approved FAQ entry (docs/protocol.md, "FAQ answers"). */
export type AnswerSource = Wire.DoneFrame["source"];

/** A thumbs up/down on an answer. */
export type Rating = Wire.FeedbackFrame["rating"];

/** Template variable values: strings, and integers for `integer` variables. */
export type VariableValues = NonNullable<Wire.SendFrame["variables"]>;

/** `T` with the fields of `O` widened: where `parseServerFrame` takes more than the schema says. */
type Lenient<T, O extends { [K in keyof O]: K extends keyof T ? unknown : never }> = Omit<T, keyof O> & O;

/** A newer server's code is shown like any other (its `message`), so any string is kept. */
export type ErrorFrame = Lenient<Wire.ErrorFrame, { code: string }>;

/** The server could not reproduce a templated send exactly: send it again with the full text (any `reason`). */
export type ResendFullFrame = Lenient<Wire.ResendFullFrame, { reason: string }>;

/** An admin published a template: revalidate `GET /api/templates/` (`etag` null when left out). */
export type TemplatesChangedFrame = Lenient<Wire.TemplatesChangedFrame, { etag: string | null }>;

type Widened = Wire.ErrorFrame | Wire.ResendFullFrame | Wire.TemplatesChangedFrame;

/** What `parseServerFrame` returns: the server's frames, a few fields widened (above). */
export type ServerFrame = Exclude<Wire.ServerFrame, Widened> | ErrorFrame | ResendFullFrame | TemplatesChangedFrame;

// Compile-time check: every frame the server sends is a ServerFrame (the widening only widens).
type Assert<T extends true> = T;
type _EveryWireFrameIsAServerFrame = Assert<Wire.ServerFrame extends ServerFrame ? true : false>;

/** Whether `f` has `code`; only a code of the schemas compiles, so a renamed code breaks the build, not the page. */
export function hasCode(f: ErrorFrame, code: Wire.ErrorCode): boolean {
  return f.code === code;
}

export function resumeFrame(id: string, messageId: string, lastSeq: number): Wire.ResumeFrame {
  return { type: "chat.resume", id, message_id: messageId, last_seq: Math.max(0, Math.floor(lastSeq)) };
}

/**
 * A plain send: `text` is always there. A templated send (first message of a new conversation
 * only, `templatedSendFrame`) carries `template` + `variables` and then either nothing else (the
 * text is exactly the rendered body), or `patch` + `result_sha256` (the user's edits), or
 * `text` (the full final text: after `chat.resend_full`, or when a patch is not possible).
 */
export function sendFrame(id: string, conversationId: string | null, text: string): Wire.SendFrame {
  return { type: "chat.send", id, conversation_id: conversationId, text };
}

/** What a templated send carries besides the template reference and the variables. */
export type TemplatedPayload = { kind: "exact"; resultSha256: string } | { kind: "patch"; patch: string; resultSha256: string } | { kind: "text"; text: string };

/**
 * A `chat.send` starting a new conversation from a template. `exact`: the text is the
 * rendered body as is (no text, no patch; the result hash lets the server catch a render
 * that differs from ours); `patch`: the user's edits of the rendered body;
 * `text`: the full final text.
 */
export function templatedSendFrame(id: string, template: Wire.TemplateRef, variables: VariableValues, payload: TemplatedPayload): Wire.SendFrame {
  const frame: Wire.SendFrame = {
    type: "chat.send",
    id,
    conversation_id: null,
    template: { id: template.id, version: template.version, sha256: template.sha256 },
    variables: { ...variables },
  };
  if (payload.kind === "exact") {
    frame.result_sha256 = payload.resultSha256;
  } else if (payload.kind === "patch") {
    frame.patch = payload.patch;
    frame.result_sha256 = payload.resultSha256;
  } else if (payload.kind === "text") {
    frame.text = payload.text;
  }
  return frame;
}

/**
 * The answer to `chat.resend_full`: the same frame (same id, template and variables) with
 * the full `text`, and without `patch`/`result_sha256`.
 */
export function withFullText(frame: Wire.SendFrame, text: string): Wire.SendFrame {
  const { patch: _patch, result_sha256: _sha, text: _text, ...rest } = frame;
  return { ...rest, text };
}

/** Ask for a person in the conversation, or stop waiting for one (docs/handoff.md). */
export function handoffFrame(id: string, conversationId: string, action: "request" | "cancel", offered = false): Wire.HandoffFrame {
  const frame: Wire.HandoffFrame = { type: "chat.handoff", id, conversation_id: conversationId, action };
  return offered ? { ...frame, reason: "offered" } : frame;
}

/** While nobody of the team is online: the email address to be written to. */
export function contactFrame(id: string, conversationId: string, email: string): Wire.HandoffFrame {
  return { type: "chat.handoff", id, conversation_id: conversationId, action: "contact", email };
}

/** The customer is writing in a conversation a person is asked for or holds. */
export function typingFrame(id: string, conversationId: string): Wire.TypingFrame {
  return { type: "chat.typing", id, conversation_id: conversationId };
}

/** Who answers the conversation now, and the people's messages after `afterMessageId`. */
export function syncFrame(id: string, conversationId: string, afterMessageId: string | null): Wire.SyncFrame {
  return { type: "chat.sync", id, conversation_id: conversationId, after_message_id: afterMessageId };
}

export function stopFrame(id: string, messageId: string | null): Wire.StopFrame {
  return messageId === null ? { type: "chat.stop", id } : { type: "chat.stop", id, message_id: messageId };
}

export function regenerateFrame(id: string, messageId: string, bypassFaq: boolean): Wire.RegenerateFrame {
  return { type: "chat.regenerate", id, message_id: messageId, bypass_faq: bypassFaq };
}

export function editFrame(id: string, messageId: string, text: string): Wire.EditFrame {
  return { type: "chat.edit", id, message_id: messageId, text };
}

/** The largest `ttft_ms` the server takes (ten minutes; tests/golden.test.ts checks it against the schema). */
export const CLIENT_TTFT_MAX_MS = 600_000;

/**
 * A `chat.client_timing` frame, or null when the measurement is not one the server takes
 * (not positive, not finite, over ten minutes). Rounded to 0.1 ms.
 */
export function clientTimingFrame(id: string, messageId: string, ttftMs: number): Wire.ClientTimingFrame | null {
  const ttft = Math.round(ttftMs * 10) / 10;
  if (!Number.isFinite(ttft) || ttft <= 0 || ttft > CLIENT_TTFT_MAX_MS) return null;
  return { type: "chat.client_timing", id, message_id: messageId, ttft_ms: ttft };
}

/** What the user is typing as the next question (typing prefill; `null`: a new chat), with the template a first message is sent from. */
export function draftFrame(id: string, conversationId: string | null, text: string, template: Wire.TemplateRef | null = null): Wire.DraftFrame {
  const frame: Wire.DraftFrame = { type: "chat.draft", id, conversation_id: conversationId, text };
  return template === null ? frame : { ...frame, template: { id: template.id, version: template.version, sha256: template.sha256 } };
}

export function feedbackFrame(id: string, messageId: string, rating: Rating): Wire.FeedbackFrame {
  return { type: "chat.feedback", id, message_id: messageId, rating };
}

/** An answer's `source` (in `chat.done` and history items): "faq" only when it says so, else "model". */
export function parseSource(v: unknown): AnswerSource {
  return v === "faq" ? "faq" : "model";
}

/** "up" / "down", or null for anything else (e.g. "" for an answer not rated yet). */
export function parseRating(v: unknown): Rating | null {
  return v === "up" || v === "down" ? v : null;
}

/** The most entries offered under one answer (the server's `max_length`). */
const MAX_SUGGESTED = 2;

/**
 * The FAQ entries offered under a model answer ("Did you mean ...?"; `chat.done`'s and the
 * history items' `suggested_entries`): malformed items are dropped, none when absent.
 */
export function parseSuggestedEntries(v: unknown): Wire.SuggestedEntry[] {
  if (!Array.isArray(v)) return [];
  const out: Wire.SuggestedEntry[] = [];
  for (const item of v as unknown[]) {
    if (!isObj(item)) continue;
    const entry_id = item["entry_id"];
    const question = item["question"];
    if (typeof entry_id !== "number" || !Number.isSafeInteger(entry_id) || typeof question !== "string" || question.trim() === "") continue;
    out.push({ entry_id, question });
  }
  return out.slice(0, MAX_SUGGESTED);
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function str(o: Obj, key: string): string | undefined {
  const v = o[key];
  return typeof v === "string" ? v : undefined;
}

function strOrNull(o: Obj, key: string): string | null | undefined {
  const v = o[key];
  if (v === null || v === undefined) return null;
  return typeof v === "string" ? v : undefined;
}

function numOrNull(o: Obj, key: string): number | null {
  const v = o[key];
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** Informational only: an integer id, else null. */
function faqEntryId(v: unknown): number | null {
  return typeof v === "number" && Number.isSafeInteger(v) ? v : null;
}

function parseUsage(v: unknown): Wire.Usage {
  const o = isObj(v) ? v : {};
  return {
    prompt_tokens: numOrNull(o, "prompt_tokens"),
    completion_tokens: numOrNull(o, "completion_tokens"),
    cached_prompt_tokens: numOrNull(o, "cached_prompt_tokens"),
  };
}

function parseTimings(v: unknown): Wire.Timings {
  const o = isObj(v) ? v : {};
  return {
    queue_wait_ms: numOrNull(o, "queue_wait_ms"),
    ttft_ms: numOrNull(o, "ttft_ms"),
    total_ms: numOrNull(o, "total_ms"),
  };
}

// Every field of the hops, so that one added to the schema does not compile until it is read.
const HOP_FIELDS: Record<keyof Wire.FirstTokenHops, true> = {
  admitted_ms: true,
  stored_ms: true,
  queued_ms: true,
  relay_first_delta_ms: true,
  socket_first_delta_ms: true,
  worker_prompt_ms: true,
  worker_engine_first_token_ms: true,
  worker_first_delta_sent_ms: true,
};

/** Where the first token's time went on the server; null when the server sent none. */
function parseHops(v: unknown): Wire.FirstTokenHops | null {
  if (!isObj(v)) return null;
  const hops = {} as Record<keyof Wire.FirstTokenHops, number | null>;
  for (const key of Object.keys(HOP_FIELDS) as (keyof Wire.FirstTokenHops)[]) hops[key] = numOrNull(v, key);
  return hops;
}

function parseConversationMessage(v: unknown): Wire.ConversationMessage | null {
  if (!isObj(v)) return null;
  const id = str(v, "id");
  const role = v["role"];
  const content = str(v, "content");
  const created_at = str(v, "created_at");
  if (id === undefined || content === undefined || created_at === undefined) return null;
  if (role !== "user" && role !== "assistant" && role !== "agent") return null;
  return { id, role, content, sender: strOrNull(v, "sender") ?? null, created_at };
}

type Parsers = { [T in ServerFrame["type"]]: (data: Obj) => Extract<ServerFrame, { type: T }> | null };

/**
 * One parser per `type` the server sends (so a frame added to the schemas does not compile
 * until it has one): null when a required field is missing or of the wrong type.
 */
const PARSERS: Parsers = {
  "chat.accepted": (data) => {
    const id = str(data, "id");
    const conversation_id = str(data, "conversation_id");
    const user_message_id = str(data, "user_message_id");
    const assistant_message_id = str(data, "assistant_message_id");
    if (id === undefined || conversation_id === undefined || user_message_id === undefined || assistant_message_id === undefined) {
      return null;
    }
    return { type: "chat.accepted", id, conversation_id, user_message_id, assistant_message_id };
  },
  "chat.started": (data) => {
    const message_id = str(data, "message_id");
    return message_id === undefined ? null : { type: "chat.started", message_id };
  },
  "chat.delta": (data) => {
    const message_id = str(data, "message_id");
    const text = str(data, "text");
    const seq = data["seq"];
    if (message_id === undefined || text === undefined || typeof seq !== "number" || !Number.isInteger(seq)) {
      return null;
    }
    return { type: "chat.delta", message_id, seq, text };
  },
  "chat.done": (data) => {
    const message_id = str(data, "message_id");
    const status = data["status"];
    if (message_id === undefined || (status !== "complete" && status !== "stopped")) return null;
    return {
      type: "chat.done",
      message_id,
      status,
      finish_reason: str(data, "finish_reason") ?? "",
      usage: parseUsage(data["usage"]),
      timings: parseTimings(data["timings"]),
      // "model" when the server leaves it out (older servers).
      source: parseSource(data["source"]),
      faq_entry_id: faqEntryId(data["faq_entry_id"]),
      // false when the server leaves it out (older servers)
      resumed: data["resumed"] === true,
      hops: parseHops(data["hops"]),
      // none when the server leaves them out (older servers)
      suggested_entries: parseSuggestedEntries(data["suggested_entries"]),
      offer_person: data["offer_person"] === true,
    };
  },
  "chat.feedback_recorded": (data) => {
    const id = str(data, "id");
    const message_id = str(data, "message_id");
    const rating = parseRating(data["rating"]);
    if (id === undefined || message_id === undefined || rating === null) return null;
    return { type: "chat.feedback_recorded", id, message_id, rating };
  },
  "chat.error": (data) => {
    const id = strOrNull(data, "id");
    const message_id = strOrNull(data, "message_id");
    const code = str(data, "code");
    const message = str(data, "message");
    if (id === undefined || message_id === undefined || code === undefined || message === undefined) return null;
    const retry = data["retry_after_s"];
    const retry_after_s = typeof retry === "number" && Number.isFinite(retry) && retry >= 0 ? retry : null;
    return { type: "chat.error", id, message_id, code, message, retry_after_s };
  },
  "chat.snapshot": (data) => {
    const message_id = str(data, "message_id");
    const content = str(data, "content");
    if (message_id === undefined || content === undefined) return null;
    return { type: "chat.snapshot", message_id, content };
  },
  "chat.resend_full": (data) => {
    const id = str(data, "id");
    if (id === undefined) return null;
    return { type: "chat.resend_full", id, reason: str(data, "reason") ?? "" };
  },
  "chat.handoff_state": (data) => {
    const conversation_id = str(data, "conversation_id");
    const state = data["state"];
    const notice = str(data, "notice");
    if (conversation_id === undefined || notice === undefined) return null;
    if (state !== "bot" && state !== "waiting" && state !== "with_agent" && state !== "closed") return null;
    const position = data["position"] ?? null;
    const agent = strOrNull(data, "agent");
    const contact_email = strOrNull(data, "contact_email");
    const nobody = data["nobody_online"] === undefined ? false : data["nobody_online"]; // older servers: absent
    if ((position !== null && !(typeof position === "number" && Number.isSafeInteger(position))) || agent === undefined) return null;
    if (contact_email === undefined || typeof nobody !== "boolean") return null;
    return { type: "chat.handoff_state", conversation_id, state, notice, position, agent, nobody_online: nobody, contact_email };
  },
  "chat.human": (data) => {
    const id = strOrNull(data, "id");
    const conversation_id = str(data, "conversation_id");
    const message = parseConversationMessage(data["message"]);
    if (id === undefined || conversation_id === undefined || message === null) return null;
    return { type: "chat.human", id, conversation_id, message };
  },
  "chat.agent_typing": (data) => {
    const conversation_id = str(data, "conversation_id");
    const agent = str(data, "agent");
    if (conversation_id === undefined || agent === undefined) return null;
    return { type: "chat.agent_typing", conversation_id, agent };
  },
  "templates.changed": (data) => {
    // Only a trigger to revalidate, so a missing etag is fine.
    const etag = strOrNull(data, "etag");
    return { type: "templates.changed", etag: etag ?? null };
  },
};

/**
 * Parse one server text frame. Returns null for anything that is not valid JSON, has an
 * unknown `type`, or lacks a required field; the caller ignores such frames.
 * `usage`/`timings` are informational, so missing numbers there become null instead.
 */
export function parseServerFrame(raw: unknown): ServerFrame | null {
  if (typeof raw !== "string") return null;
  let data: unknown;
  try {
    data = JSON.parse(raw);
  } catch {
    return null;
  }
  if (!isObj(data)) return null;
  const type = data["type"];
  if (typeof type !== "string" || !Object.prototype.hasOwnProperty.call(PARSERS, type)) return null;
  return PARSERS[type as ServerFrame["type"]](data);
}
