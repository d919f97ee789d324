// GENERATED from the pydantic schemas in chatapp/realtime/agent_frames.py by
// `python -m chatapp.realtime.golden` (or `make protocol`). Do not edit: change the
// schemas and regenerate (tests/chatapp/realtime/test_golden_frames.py fails while
// this is stale).
// frontend/src/console.ts builds on these types; docs/handoff.md describes the frames.

/** Every `type` a browser may send. */
export const CLIENT_FRAME_TYPES = ["agent.claim", "agent.open", "agent.send", "agent.release", "agent.close", "agent.transfer", "agent.draft_stop", "agent.typing"] as const;
export type ClientFrameType = (typeof CLIENT_FRAME_TYPES)[number];

/** Every `type` the server sends. */
export const SERVER_FRAME_TYPES = ["agent.queue", "agent.transcript", "agent.message", "agent.handoff", "agent.draft", "agent.customer_typing", "agent.error"] as const;
export type ServerFrameType = (typeof SERVER_FRAME_TYPES)[number];

/** Every `code` of a `agent.error`. */
export const ERROR_CODES = ["bad_json", "too_large", "unknown_type", "invalid", "not_found", "busy", "no_worker", "engine", "internal", "template_unknown", "worker_lost", "interrupted", "rate_limited", "too_long", "unavailable", "timeout", "forbidden"] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

// --- browser -> server: what the server accepts (`?`: may be left out; the default
// applies). Formats and bounds in the comments are checked by the server.

/**
 * Take a waiting conversation (`agent.handoff` to all, or `agent.error` busy naming
 * who was first).
 */
export interface ClaimFrame {
  type: "agent.claim";
  /** uuid */
  id: string;
  /** >= 1; <= 2147483647 */
  handoff_id: number;
}

/**
 * Show a conversation: its transcript after `after_message_id` (all when null), then
 * its live messages and changes.
 */
export interface OpenFrame {
  type: "agent.open";
  /** uuid */
  id: string;
  /** uuid */
  conversation_id: string;
  /** uuid; default null */
  after_message_id?: string | null;
}

/**
 * A reply to the customer of a conversation the agent holds; stored, then delivered.
 * The same `id` again is the same reply (after a reconnect), never a second.
 */
export interface ReplyFrame {
  type: "agent.send";
  /** uuid */
  id: string;
  /** >= 1; <= 2147483647 */
  handoff_id: number;
  /** min length 1 */
  text: string;
}

/** Back to the assistant. */
export interface ReleaseFrame {
  type: "agent.release";
  /** uuid */
  id: string;
  /** >= 1; <= 2147483647 */
  handoff_id: number;
}

export interface CloseFrame {
  type: "agent.close";
  /** uuid */
  id: string;
  /** >= 1; <= 2147483647 */
  handoff_id: number;
  /** max length 500; default "" */
  resolution?: string;
}

export interface TransferFrame {
  type: "agent.transfer";
  /** uuid */
  id: string;
  /** >= 1; <= 2147483647 */
  handoff_id: number;
  /** min length 1; max length 150 */
  to_agent: string;
}

/** The agent started writing their own reply: stop the model's draft of it. */
export interface DraftStopFrame {
  type: "agent.draft_stop";
  /** uuid */
  id: string;
  /** uuid */
  conversation_id: string;
}

/**
 * The agent is writing a reply in a conversation they hold: the customer sees
 * "Dana is typing…". Sent every 2 s at most while typing; nothing is stored.
 */
export interface AgentTypingClientFrame {
  type: "agent.typing";
  /** uuid */
  id: string;
  /** uuid */
  conversation_id: string;
}

export type ClientFrame = ClaimFrame | OpenFrame | ReplyFrame | ReleaseFrame | CloseFrame | TransferFrame | DraftStopFrame | AgentTypingClientFrame;

// --- server -> browser: what the server sends (every field is always there).

/** The open handoffs: waiting ones, longest wait first, then those with a person. */
export interface QueueFrame {
  type: "agent.queue";
  items: QueueItem[];
}

export interface TranscriptFrame {
  type: "agent.transcript";
  /** uuid */
  id: string;
  /** uuid */
  conversation_id: string;
  handoff_id: number | null;
  state: "bot" | "waiting" | "with_agent" | "closed";
  agent: string | null;
  mine: boolean;
  messages: ConversationMessage[];
}

/**
 * A message in a conversation the console shows (the customer's or an agent's); `id`:
 * the agent.send it answers, on the sending socket.
 */
export interface AgentMessageFrame {
  type: "agent.message";
  /** uuid */
  id: string | null;
  /** uuid */
  conversation_id: string;
  message: ConversationMessage;
}

/** Who answers a conversation the console shows changed. */
export interface AgentHandoffFrame {
  type: "agent.handoff";
  /** uuid */
  conversation_id: string;
  handoff_id: number | null;
  state: "bot" | "waiting" | "with_agent" | "closed";
  agent: string | null;
  mine: boolean;
}

/**
 * The model's draft of a reply to the customer's last message, as it is written: `text`
 * is the next piece (empty at the end). `status`: `streaming`, then `done`, `stopped`
 * (agent.draft_stop, a reply sent), `failed`, or `busy` (no engine free: no draft).
 */
export interface AgentDraftFrame {
  type: "agent.draft";
  /** uuid */
  conversation_id: string;
  /** uuid */
  draft_id: string;
  text: string;
  status: "streaming" | "done" | "stopped" | "failed" | "busy";
  source: "model" | "faq";
}

/** The customer of a conversation the console shows is writing (shown a few seconds). */
export interface CustomerTypingFrame {
  type: "agent.customer_typing";
  /** uuid */
  conversation_id: string;
}

export interface AgentErrorFrame {
  type: "agent.error";
  /** uuid */
  id: string | null;
  code: ErrorCode;
  message: string;
}

export interface ConversationMessage {
  /** uuid */
  id: string;
  role: "user" | "assistant" | "agent";
  content: string;
  sender: string | null;
  created_at: string;
}

export interface QueueItem {
  handoff_id: number;
  /** uuid */
  conversation_id: string;
  state: "waiting" | "with_agent";
  waited_s: number;
  site: string | null;
  customer: string;
  first_question: string;
  last_message: string;
  agent: string | null;
  mine: boolean;
  contact_email: string | null;
  reason: "asked" | "typed" | "offered";
  near_entries: string[];
}

export type ServerFrame = QueueFrame | TranscriptFrame | AgentMessageFrame | AgentHandoffFrame | AgentDraftFrame | CustomerTypingFrame | AgentErrorFrame;
