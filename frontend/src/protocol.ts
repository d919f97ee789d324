// Browser <-> web WebSocket protocol (docs/protocol.md). Pure: no DOM, no globals.

export type MessageStatus = "streaming" | "complete" | "stopped" | "failed";

/** Where an answer came from: the model, or an admin-approved FAQ entry (docs/protocol.md, "FAQ answers"). */
export type AnswerSource = "model" | "faq";

/** A thumbs up/down on an answer. */
export type Rating = "up" | "down";

/** The published template version the browser has cached (docs/protocol.md, "Templated messages"). */
export interface TemplateRef {
  id: number;
  version: number;
  sha256: string;
}

/** Template variable values: strings, and integers for `integer` variables. */
export type VariableValues = Record<string, string | number>;

/**
 * `text` is always present on a plain send. A templated send (first message of a new
 * conversation only) carries `template` + `variables` and then either nothing else (the
 * text is exactly the rendered body), or `patch` + `result_sha256` (the user's edits), or
 * `text` (the full final text: after `chat.resend_full`, or when a patch is not possible).
 */
export interface SendFrame {
  type: "chat.send";
  id: string;
  conversation_id: string | null;
  text?: string;
  template?: TemplateRef;
  variables?: VariableValues;
  patch?: string;
  result_sha256?: string;
}

export interface StopFrame {
  type: "chat.stop";
  id: string;
  message_id?: string;
}

/** Answer the newest question again, into the same message; `bypass_faq`: "Ask the assistant instead". */
export interface RegenerateFrame {
  type: "chat.regenerate";
  id: string;
  message_id: string;
  bypass_faq: boolean;
}

/** Rate an answer; answered by `chat.feedback_recorded`. */
export interface FeedbackFrame {
  type: "chat.feedback";
  id: string;
  message_id: string;
  rating: Rating;
}

/** After a reconnect: every delta of `message_id` after `last_seq`, then live ones (docs/protocol.md). */
export interface ResumeFrame {
  type: "chat.resume";
  id: string;
  message_id: string;
  last_seq: number;
}

/**
 * Edit-and-resend: replace the text of one of your questions (`message_id`); every later
 * message of the conversation is deleted and the question is answered again into its
 * answer's message (`chat.accepted` with the same message ids, then the stream).
 */
export interface EditFrame {
  type: "chat.edit";
  id: string;
  message_id: string;
  text: string;
}

/**
 * The browser's time to first token of one of your answers: from sending the frame that
 * asked for it to painting its first token, in milliseconds (0 < ttft_ms <= 600000). Sent
 * once per answer, for the service's metrics; the server replies only to refuse it.
 */
export interface ClientTimingFrame {
  type: "chat.client_timing";
  id: string;
  message_id: string;
  ttft_ms: number;
}

export type ClientFrame = SendFrame | StopFrame | RegenerateFrame | FeedbackFrame | ResumeFrame | EditFrame | ClientTimingFrame;

export interface AcceptedFrame {
  type: "chat.accepted";
  id: string;
  conversation_id: string;
  user_message_id: string;
  assistant_message_id: string;
}

export interface DeltaFrame {
  type: "chat.delta";
  message_id: string;
  seq: number;
  text: string;
}

export interface Usage {
  prompt_tokens: number | null;
  completion_tokens: number | null;
  cached_prompt_tokens: number | null;
}

export interface Timings {
  queue_wait_ms: number | null;
  ttft_ms: number | null;
  total_ms: number | null;
}

export interface DoneFrame {
  type: "chat.done";
  message_id: string;
  status: "complete" | "stopped";
  finish_reason: string;
  usage: Usage;
  timings: Timings;
  /** "model" when the server leaves it out (older servers). */
  source: AnswerSource;
  faq_entry_id: number | null;
}

/** The rating of `chat.feedback` `id` is stored. */
export interface FeedbackRecordedFrame {
  type: "chat.feedback_recorded";
  id: string;
  message_id: string;
  rating: Rating;
}

export interface ErrorFrame {
  type: "chat.error";
  id: string | null;
  message_id: string | null;
  code: string;
  message: string;
  /** busy, rate_limited, no_worker: seconds until trying again makes sense. */
  retry_after_s: number | null;
}

/** The whole text of an answer so far: replaces what is shown (a resume the log could not serve). */
export interface SnapshotFrame {
  type: "chat.snapshot";
  message_id: string;
  content: string;
}

/** The server could not reproduce a templated send exactly: send it again with the full text. */
export interface ResendFullFrame {
  type: "chat.resend_full";
  id: string;
  reason: string;
}

/** An admin published a template: revalidate `GET /api/templates/`. */
export interface TemplatesChangedFrame {
  type: "templates.changed";
  etag: string | null;
}

export type ServerFrame =
  | AcceptedFrame
  | DeltaFrame
  | DoneFrame
  | SnapshotFrame
  | FeedbackRecordedFrame
  | ErrorFrame
  | ResendFullFrame
  | TemplatesChangedFrame;

export function resumeFrame(id: string, messageId: string, lastSeq: number): ResumeFrame {
  return { type: "chat.resume", id, message_id: messageId, last_seq: Math.max(0, Math.floor(lastSeq)) };
}

export function sendFrame(id: string, conversationId: string | null, text: string): SendFrame {
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
export function templatedSendFrame(id: string, template: TemplateRef, variables: VariableValues, payload: TemplatedPayload): SendFrame {
  const frame: SendFrame = {
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
export function withFullText(frame: SendFrame, text: string): SendFrame {
  const { patch: _patch, result_sha256: _sha, text: _text, ...rest } = frame;
  return { ...rest, text };
}

export function stopFrame(id: string, messageId: string | null): StopFrame {
  return messageId === null ? { type: "chat.stop", id } : { type: "chat.stop", id, message_id: messageId };
}

export function regenerateFrame(id: string, messageId: string, bypassFaq: boolean): RegenerateFrame {
  return { type: "chat.regenerate", id, message_id: messageId, bypass_faq: bypassFaq };
}

export function editFrame(id: string, messageId: string, text: string): EditFrame {
  return { type: "chat.edit", id, message_id: messageId, text };
}

/** The largest `ttft_ms` the server takes (ten minutes). */
export const CLIENT_TTFT_MAX_MS = 600_000;

/**
 * A `chat.client_timing` frame, or null when the measurement is not one the server takes
 * (not positive, not finite, over ten minutes). Rounded to 0.1 ms.
 */
export function clientTimingFrame(id: string, messageId: string, ttftMs: number): ClientTimingFrame | null {
  const ttft = Math.round(ttftMs * 10) / 10;
  if (!Number.isFinite(ttft) || ttft <= 0 || ttft > CLIENT_TTFT_MAX_MS) return null;
  return { type: "chat.client_timing", id, message_id: messageId, ttft_ms: ttft };
}

export function feedbackFrame(id: string, messageId: string, rating: Rating): FeedbackFrame {
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

function parseUsage(v: unknown): Usage {
  const o = isObj(v) ? v : {};
  return {
    prompt_tokens: numOrNull(o, "prompt_tokens"),
    completion_tokens: numOrNull(o, "completion_tokens"),
    cached_prompt_tokens: numOrNull(o, "cached_prompt_tokens"),
  };
}

function parseTimings(v: unknown): Timings {
  const o = isObj(v) ? v : {};
  return {
    queue_wait_ms: numOrNull(o, "queue_wait_ms"),
    ttft_ms: numOrNull(o, "ttft_ms"),
    total_ms: numOrNull(o, "total_ms"),
  };
}

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
  switch (data["type"]) {
    case "chat.accepted": {
      const id = str(data, "id");
      const conversation_id = str(data, "conversation_id");
      const user_message_id = str(data, "user_message_id");
      const assistant_message_id = str(data, "assistant_message_id");
      if (id === undefined || conversation_id === undefined || user_message_id === undefined || assistant_message_id === undefined) {
        return null;
      }
      return { type: "chat.accepted", id, conversation_id, user_message_id, assistant_message_id };
    }
    case "chat.delta": {
      const message_id = str(data, "message_id");
      const text = str(data, "text");
      const seq = data["seq"];
      if (message_id === undefined || text === undefined || typeof seq !== "number" || !Number.isInteger(seq)) {
        return null;
      }
      return { type: "chat.delta", message_id, seq, text };
    }
    case "chat.done": {
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
        source: parseSource(data["source"]),
        faq_entry_id: faqEntryId(data["faq_entry_id"]),
      };
    }
    case "chat.feedback_recorded": {
      const id = str(data, "id");
      const message_id = str(data, "message_id");
      const rating = parseRating(data["rating"]);
      if (id === undefined || message_id === undefined || rating === null) return null;
      return { type: "chat.feedback_recorded", id, message_id, rating };
    }
    case "chat.error": {
      const id = strOrNull(data, "id");
      const message_id = strOrNull(data, "message_id");
      const code = str(data, "code");
      const message = str(data, "message");
      if (id === undefined || message_id === undefined || code === undefined || message === undefined) return null;
      const retry = data["retry_after_s"];
      const retry_after_s = typeof retry === "number" && Number.isFinite(retry) && retry >= 0 ? retry : null;
      return { type: "chat.error", id, message_id, code, message, retry_after_s };
    }
    case "chat.snapshot": {
      const message_id = str(data, "message_id");
      const content = str(data, "content");
      if (message_id === undefined || content === undefined) return null;
      return { type: "chat.snapshot", message_id, content };
    }
    case "chat.resend_full": {
      const id = str(data, "id");
      if (id === undefined) return null;
      return { type: "chat.resend_full", id, reason: str(data, "reason") ?? "" };
    }
    case "templates.changed": {
      // Only a trigger to revalidate, so a missing etag is fine.
      const etag = strOrNull(data, "etag");
      return { type: "templates.changed", etag: etag ?? null };
    }
    default:
      return null;
  }
}
