// Typing prefill: while the user types the next question, the page tells the server
// (chat.draft), so a worker can put the conversation's prompt with the draft in its engine's
// prefix cache before Send. Debounced; sent when typing starts and again when the draft has
// grown a lot (a paste), never while an answer streams or a template is being filled in.

import { newId } from "./ids.ts";
import { draftFrame, type ClientFrame } from "./protocol.ts";

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

export class DraftPrefill {
  private timer: unknown = null;
  /** Length of the draft last sent for this question (null: none yet). */
  private sentLength: number | null = null;

  constructor(
    private readonly send: (frame: ClientFrame) => boolean,
    /** Whether a draft may go out now, and for which conversation (null: a new chat). */
    private readonly target: () => { allowed: boolean; conversationId: string | null },
    private readonly timers: DraftTimers = browserTimers,
  ) {}

  /** The textbox changed: (re)start the debounce. */
  typed(text: string): void {
    if (this.timer !== null) this.timers.clear(this.timer);
    this.timer = this.timers.set(() => {
      this.timer = null;
      this.flush(text);
    }, DRAFT_DEBOUNCE_MS);
  }

  /** The question was sent (or the chat changed): the next draft is a new question's. */
  reset(): void {
    if (this.timer !== null) this.timers.clear(this.timer);
    this.timer = null;
    this.sentLength = null;
  }

  private flush(text: string): void {
    const draft = text.trim();
    if (draft.length < DRAFT_MIN_CHARS) return;
    if (this.sentLength !== null && draft.length < this.sentLength + DRAFT_GROWTH_CHARS) return;
    const { allowed, conversationId } = this.target();
    if (!allowed) return;
    // as typed: the prompt of the question sent later starts with the same bytes
    if (this.send(draftFrame(newId(), conversationId, text))) this.sentLength = draft.length;
  }
}
