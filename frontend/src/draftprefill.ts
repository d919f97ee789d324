// Typing prefill: while the user types the next question, the page tells the server
// (chat.draft), so a worker can put the conversation's prompt with the draft in its engine's
// prefix cache before Send. Debounced; sent when typing starts and again when the draft has
// grown a lot (a paste), never while an answer streams. The first message of a template
// conversation goes out once its variables are all filled in, with the template reference
// (the server puts the template's system prompt before it).

import { newId } from "./ids.ts";
import { draftFrame, type ClientFrame, type TemplateRef } from "./protocol.ts";

/** A draft shorter than this is not worth a prefill (the prompt is nearly the history). */
export const DRAFT_MIN_CHARS = 16;
/** Grown by this much since the last draft sent (a paste): send it again. */
export const DRAFT_GROWTH_CHARS = 200;
/** Quiet this long after a keystroke before the draft goes out. */
export const DRAFT_DEBOUNCE_MS = 400;

export interface DraftTimers {
  set(callback: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const browserTimers: DraftTimers = {
  set: (callback, ms) => setTimeout(callback, ms),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** What a draft would be sent for now; null: none may go out (an answer streams, variables are missing). */
export interface DraftTarget {
  /** null: a new chat. */
  conversationId: string | null;
  /** The template the first message is sent from (null: plain text). */
  template: TemplateRef | null;
  /** The message as it would be sent. */
  text: string;
}

export class DraftPrefill {
  private timer: unknown = null;
  /** Length of the draft last sent for this question (null: none yet). */
  private sentLength: number | null = null;
  /** Which question that was (conversation and template): another one starts afresh. */
  private sentFor: string | null = null;

  constructor(
    private readonly send: (frame: ClientFrame) => boolean,
    /** The draft as it stands, read when typing pauses. */
    private readonly target: () => DraftTarget | null,
    private readonly timers: DraftTimers = browserTimers,
  ) {}

  /** The draft changed (typed, or a template's variables): (re)start the debounce. */
  typed(): void {
    if (this.timer !== null) this.timers.clear(this.timer);
    this.timer = this.timers.set(() => {
      this.timer = null;
      this.flush();
    }, DRAFT_DEBOUNCE_MS);
  }

  /** The question was sent (or the chat changed): the next draft is a new question's. */
  reset(): void {
    if (this.timer !== null) this.timers.clear(this.timer);
    this.timer = null;
    this.sentLength = null;
    this.sentFor = null;
  }

  private flush(): void {
    const target = this.target();
    if (target === null) return;
    const draft = target.text.trim();
    if (draft.length < DRAFT_MIN_CHARS) return;
    const key = `${target.conversationId ?? ""} ${target.template === null ? "" : `${target.template.id}@${target.template.version}`}`;
    if (key !== this.sentFor) this.sentLength = null;
    if (this.sentLength !== null && draft.length < this.sentLength + DRAFT_GROWTH_CHARS) return;
    // as typed: the prompt of the question sent later starts with the same bytes
    if (this.send(draftFrame(newId(), target.conversationId, target.text, target.template))) {
      this.sentLength = draft.length;
      this.sentFor = key;
    }
  }
}
