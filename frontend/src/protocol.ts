// Browser <-> web WebSocket protocol (docs/protocol.md). Pure: no DOM, no globals.

export type MessageStatus = "streaming" | "complete" | "stopped" | "failed";

export interface SendFrame {
  type: "chat.send";
  id: string;
  conversation_id: string | null;
  text: string;
}

export interface StopFrame {
  type: "chat.stop";
  id: string;
  message_id?: string;
}

export type ClientFrame = SendFrame | StopFrame;

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
}

export interface ErrorFrame {
  type: "chat.error";
  id: string | null;
  message_id: string | null;
  code: string;
  message: string;
}

export type ServerFrame = AcceptedFrame | DeltaFrame | DoneFrame | ErrorFrame;

export function sendFrame(id: string, conversationId: string | null, text: string): SendFrame {
  return { type: "chat.send", id, conversation_id: conversationId, text };
}

export function stopFrame(id: string, messageId: string | null): StopFrame {
  return messageId === null ? { type: "chat.stop", id } : { type: "chat.stop", id, message_id: messageId };
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
      };
    }
    case "chat.error": {
      const id = strOrNull(data, "id");
      const message_id = strOrNull(data, "message_id");
      const code = str(data, "code");
      const message = str(data, "message");
      if (id === undefined || message_id === undefined || code === undefined || message === undefined) return null;
      return { type: "chat.error", id, message_id, code, message };
    }
    default:
      return null;
  }
}
