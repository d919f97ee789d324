// GENERATED from the pydantic schemas in chatapp/realtime/schemas.py by
// `python -m chatapp.realtime.golden` (or `make protocol`). Do not edit: change the
// schemas and regenerate (tests/chatapp/realtime/test_golden_frames.py fails while
// this is stale).
// frontend/src/protocol.ts builds on these types; docs/protocol.md describes the frames.

/** Every `type` a browser may send. */
export const CLIENT_FRAME_TYPES = ["chat.send", "chat.handoff", "chat.sync", "chat.typing", "chat.draft", "chat.stop", "chat.regenerate", "chat.feedback", "chat.resume", "chat.edit", "chat.client_timing"] as const;
export type ClientFrameType = (typeof CLIENT_FRAME_TYPES)[number];

/** Every `type` the server sends. */
export const SERVER_FRAME_TYPES = ["chat.accepted", "chat.started", "chat.delta", "chat.done", "chat.snapshot", "chat.error", "chat.resend_full", "templates.changed", "chat.feedback_recorded", "chat.handoff_state", "chat.human", "chat.agent_typing"] as const;
export type ServerFrameType = (typeof SERVER_FRAME_TYPES)[number];

/** Every `code` of a `chat.error`. */
export const ERROR_CODES = ["bad_json", "too_large", "unknown_type", "invalid", "not_found", "busy", "no_worker", "engine", "internal", "template_unknown", "worker_lost", "interrupted", "rate_limited", "too_long", "unavailable", "timeout", "forbidden"] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

// --- browser -> server: what the server accepts (`?`: may be left out; the default
// applies). Formats and bounds in the comments are checked by the server.

export interface SendFrame {
  type: "chat.send";
  /** uuid */
  id: string;
  /** uuid; default null */
  conversation_id?: string | null;
  /** min length 1; default null */
  text?: string | null;
  /** default null */
  template?: TemplateRef | null;
  /** default null */
  variables?: { [key: string]: string | number } | null;
  /** default null */
  patch?: string | null;
  /** pattern ^[0-9a-f]{64}$; default null */
  result_sha256?: string | null;
}

/**
 * Ask for a person in a conversation (`request`: the same again while waiting or held
 * is one ask), stop waiting (`cancel`), or, while nobody of the team is online, leave an
 * email address to be written to (`contact`, with `email`). Answered with
 * `chat.handoff_state`.
 */
export interface HandoffFrame {
  type: "chat.handoff";
  /** uuid */
  id: string;
  /** uuid */
  conversation_id: string;
  action: "request" | "cancel" | "contact";
  /** max length 254; default null */
  email?: string | null;
  /** default "asked" */
  reason?: "asked" | "offered";
}

/**
 * The page shows `conversation_id` (loaded, or reconnected): who answers it now
 * (`chat.handoff_state`), the messages stored after `after_message_id` that people wrote
 * (`chat.human`, each once; all of them when null), then the live ones.
 */
export interface SyncFrame {
  type: "chat.sync";
  /** uuid */
  id: string;
  /** uuid */
  conversation_id: string;
  /** uuid; default null */
  after_message_id?: string | null;
}

/**
 * The customer is writing in a conversation a person is asked for or holds: the person
 * sees "typing…" (`agent.customer_typing`). The page sends one every 2 s at most while
 * typing; nothing is stored.
 */
export interface TypingFrame {
  type: "chat.typing";
  /** uuid */
  id: string;
  /** uuid */
  conversation_id: string;
}

/**
 * What the user is typing as the next question of a conversation (None: a new chat),
 * so a worker can prefill its prompt before Send (typing prefill). With `template`, the
 * first message of a new conversation from that template, its variables filled in: `text`
 * is the message as the page shows it, prefilled after the template's system prompt (the
 * reference's sha256 is not checked: a draft derives nothing from the browser's copy).
 * No reply unless it is refused; never stored or logged.
 */
export interface DraftFrame {
  type: "chat.draft";
  /** uuid */
  id: string;
  /** uuid; default null */
  conversation_id?: string | null;
  /** min length 1 */
  text: string;
  /** default null */
  template?: TemplateRef | null;
}

export interface StopFrame {
  type: "chat.stop";
  /** uuid */
  id: string;
  /** uuid; default null */
  message_id?: string | null;
}

/** Answer the newest question again; `bypass_faq` is "Ask the assistant instead". */
export interface RegenerateFrame {
  type: "chat.regenerate";
  /** uuid */
  id: string;
  /** uuid */
  message_id: string;
  /** default false */
  bypass_faq?: boolean;
}

export interface FeedbackFrame {
  type: "chat.feedback";
  /** uuid */
  id: string;
  /** uuid */
  message_id: string;
  rating: "up" | "down";
}

/** Continue showing an answer after a reconnect: everything after `last_seq`, then live. */
export interface ResumeFrame {
  type: "chat.resume";
  /** uuid */
  id: string;
  /** uuid */
  message_id: string;
  /** >= 0; <= 1000000; default 0 */
  last_seq?: number;
}

/**
 * Edit-and-resend: replace one of your questions; later messages are removed and the
 * question is answered again into its answer's message.
 */
export interface EditFrame {
  type: "chat.edit";
  /** uuid */
  id: string;
  /** uuid */
  message_id: string;
  /** min length 1 */
  text: string;
}

/**
 * The browser's time to first token of one of your answers: from sending the frame that
 * asked for it to painting its first token. Reported once per answer (for metrics).
 */
export interface ClientTimingFrame {
  type: "chat.client_timing";
  /** uuid */
  id: string;
  /** uuid */
  message_id: string;
  /** > 0; <= 600000.0 */
  ttft_ms: number;
}

export interface TemplateRef {
  /** >= 1; <= 2147483647 */
  id: number;
  /** >= 1; <= 2147483647 */
  version: number;
  /** pattern ^[0-9a-f]{64}$ */
  sha256: string;
}

export type ClientFrame = SendFrame | HandoffFrame | SyncFrame | TypingFrame | DraftFrame | StopFrame | RegenerateFrame | FeedbackFrame | ResumeFrame | EditFrame | ClientTimingFrame;

// --- server -> browser: what the server sends (every field is always there).

export interface AcceptedFrame {
  type: "chat.accepted";
  /** uuid */
  id: string;
  /** uuid */
  conversation_id: string;
  /** uuid */
  user_message_id: string;
  /** uuid */
  assistant_message_id: string;
}

/**
 * A worker started the answer: it is reading the question (prefill) and its first token
 * follows. Before it (after `chat.accepted`) the answer waits in the queue.
 */
export interface StartedFrame {
  type: "chat.started";
  /** uuid */
  message_id: string;
}

export interface DeltaFrame {
  type: "chat.delta";
  /** uuid */
  message_id: string;
  seq: number;
  text: string;
}

export interface DoneFrame {
  type: "chat.done";
  /** uuid */
  message_id: string;
  status: "complete" | "stopped";
  finish_reason: string;
  usage: Usage;
  timings: Timings;
  source: "model" | "faq";
  faq_entry_id: number | null;
  resumed: boolean;
  hops: FirstTokenHops | null;
  suggested_entries: SuggestedEntry[];
  offer_person: boolean;
}

/**
 * The whole text of an answer so far; replaces what the browser shows for it. Sent on a
 * resume when the stream log can no longer give exactly the missing part.
 */
export interface SnapshotFrame {
  type: "chat.snapshot";
  /** uuid */
  message_id: string;
  content: string;
}

export interface ErrorFrame {
  type: "chat.error";
  /** uuid */
  id: string | null;
  /** uuid */
  message_id: string | null;
  code: ErrorCode;
  message: string;
  retry_after_s: number | null;
}

export interface ResendFullFrame {
  type: "chat.resend_full";
  /** uuid */
  id: string;
  reason: "base_mismatch" | "patch_failed" | "hash_mismatch";
}

export interface TemplatesChangedFrame {
  type: "templates.changed";
  etag: string;
}

export interface FeedbackRecordedFrame {
  type: "chat.feedback_recorded";
  /** uuid */
  id: string;
  /** uuid */
  message_id: string;
  rating: "up" | "down";
}

/** Who answers the conversation now, and what the customer is told, in words. */
export interface HandoffStateFrame {
  type: "chat.handoff_state";
  /** uuid */
  conversation_id: string;
  state: "bot" | "waiting" | "with_agent" | "closed";
  notice: string;
  position: number | null;
  agent: string | null;
  nobody_online: boolean;
  contact_email: string | null;
}

/**
 * A message written while a person is asked for or holds the conversation: the
 * customer's (to the customer's own tabs, `id` = its `chat.send` id on the sending socket)
 * or the agent's. Stored before it is sent; a page shows each message id once.
 */
export interface HumanMessageFrame {
  type: "chat.human";
  /** uuid */
  id: string | null;
  /** uuid */
  conversation_id: string;
  message: ConversationMessage;
}

/** The person holding the conversation is writing (shown a few seconds). */
export interface AgentTypingFrame {
  type: "chat.agent_typing";
  /** uuid */
  conversation_id: string;
  agent: string;
}

export interface ConversationMessage {
  /** uuid */
  id: string;
  role: "user" | "assistant" | "agent";
  content: string;
  sender: string | null;
  created_at: string;
}

/**
 * Where the answer's time to first token went on the server, in ms. The web process's
 * marks count from when it read the frame that asked for the answer (its clock); the
 * worker's from when it started serving the request (its clock). None: not measured (an
 * answer this socket did not start, or a step it never reached).
 */
export interface FirstTokenHops {
  admitted_ms: number | null;
  stored_ms: number | null;
  queued_ms: number | null;
  relay_first_delta_ms: number | null;
  socket_first_delta_ms: number | null;
  worker_prompt_ms: number | null;
  worker_engine_first_token_ms: number | null;
  worker_first_delta_sent_ms: number | null;
}

/**
 * An FAQ entry the answer's question may have meant ("Did you mean ...?"): sending
 * `question` as the next message answers it from that entry.
 */
export interface SuggestedEntry {
  entry_id: number;
  question: string;
}

export interface Timings {
  queue_wait_ms: number | null;
  ttft_ms: number | null;
  total_ms: number | null;
}

export interface Usage {
  prompt_tokens: number | null;
  completion_tokens: number | null;
  cached_prompt_tokens: number | null;
}

export type ServerFrame = AcceptedFrame | StartedFrame | DeltaFrame | DoneFrame | SnapshotFrame | ErrorFrame | ResendFullFrame | TemplatesChangedFrame | FeedbackRecordedFrame | HandoffStateFrame | HumanMessageFrame | AgentTypingFrame;
