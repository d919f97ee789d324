// The answer streaming now: which message it is, the last delta `seq` shown (repeats are
// dropped, gaps warned about, a resume after a reconnect asks for what follows it, a snapshot
// replaces the text), a pending stop, and the times of its first token (received, painted).
// No DOM: the answer's view is anything that takes text and a stats line.

import { formatAnswerStats } from "./format.ts";
import { resumeFrame, type DeltaFrame, type DoneFrame, type ResumeFrame, type SnapshotFrame } from "./protocol.ts";

/** What the stream writes to: MessageView in the page. */
export interface StreamView {
  append(text: string): void;
  setText(text: string): void;
  setMeta(line: string, data?: Record<string, string>): void;
}

export const CONNECTION_LOST_META = "connection lost · reconnecting to continue the answer…";

export class StreamingAnswer<V extends StreamView> {
  private shownSeq = 0;
  private firstDelta: number | null = null;
  private firstPaint: number | null = null;
  /** Id of the chat.stop sent for this answer and not refused yet. */
  private stopFrameId: string | null = null;

  constructor(
    readonly messageId: string,
    readonly view: V,
    /** When this page sent the frame that asked for the answer. */
    readonly sentAt: number,
    /**
     * `sentAt` is when this page sent the request, so its time to first token is reported
     * (`chat.client_timing`); false for an answer followed after a reload, whose request
     * was sent by an earlier page.
     */
    readonly measured: boolean,
  ) {}

  /** The last delta seq shown (Number.MAX_SAFE_INTEGER after a snapshot). */
  get lastSeq(): number {
    return this.shownSeq;
  }

  /** When the first visible (non-blank) text arrived. */
  get firstDeltaAt(): number | null {
    return this.firstDelta;
  }

  /** When the first visible text was rendered (right before the browser paints it). */
  get firstPaintAt(): number | null {
    return this.firstPaint;
  }

  /**
   * Extend the text with delta `seq` (received at `now`): a repeated seq is dropped, a gap is
   * warned about and shown anyway. Blank text paints nothing: the first token is the first
   * one that shows. Returns whether the text was extended.
   */
  applyDelta(seq: number, text: string, now: () => number): boolean {
    if (seq <= this.shownSeq) return false; // repeated frame
    if (seq !== this.shownSeq + 1) console.warn(`chat: delta gap, expected seq ${this.shownSeq + 1}, got ${seq}`);
    this.shownSeq = seq;
    if (this.firstDelta === null && text.trim() !== "") this.firstDelta = now();
    this.view.append(text);
    return true;
  }

  /** The server could not replay the missing part exactly: show its whole stored text. */
  applySnapshot(content: string): void {
    this.view.setText(content);
    this.shownSeq = Number.MAX_SAFE_INTEGER; // the done or error that follows ends it
  }

  /** The body was rendered at `now`: true if that painted the first token (once). */
  painted(now: () => number): boolean {
    if (this.firstPaint !== null || this.firstDelta === null) return false;
    this.firstPaint = now();
    return true;
  }

  /**
   * Browser time to first token, from the request to the first paint (else first delta);
   * null for an answer this page did not ask for (followed after a reload): the user's wait
   * began on an earlier page, and a time from the reload would understate it.
   */
  get clientTtftMs(): number | null {
    if (!this.measured) return null;
    const first = this.firstPaint ?? this.firstDelta;
    return first === null ? null : Math.max(0, first - this.sentAt);
  }

  /** A chat.stop is out and not refused: the Stop button is disabled. */
  get stopping(): boolean {
    return this.stopFrameId !== null;
  }

  stopSent(id: string): void {
    this.stopFrameId = id;
  }

  /** `id` is the chat.stop sent for this answer. */
  isStopFrame(id: string | null): boolean {
    return this.stopFrameId !== null && id === this.stopFrameId;
  }

  /** The stop was refused, or its connection closed: another may be sent. */
  stopCancelled(): void {
    this.stopFrameId = null;
  }

  /** The stats line under the finished answer: "first token 142 ms (server 97 ms) · 23 tokens". */
  showStats(f: DoneFrame): void {
    const clientTtft = this.clientTtftMs;
    const data: Record<string, string> = {};
    if (clientTtft !== null) data["ttftMs"] = String(Math.round(clientTtft));
    if (f.timings.ttft_ms !== null) data["serverTtftMs"] = String(f.timings.ttft_ms);
    // Where the wait went, for whoever looks (the bench reads these; docs/architecture.md):
    // the first delta's arrival from the send, and the server's hops.
    if (this.measured && this.firstDelta !== null) data["firstDeltaMs"] = (this.firstDelta - this.sentAt).toFixed(2);
    if (this.measured && f.hops !== null) data["hops"] = JSON.stringify(f.hops);
    this.view.setMeta(
      formatAnswerStats({
        clientTtftMs: clientTtft,
        serverTtftMs: f.timings.ttft_ms,
        completionTokens: f.usage.completion_tokens,
        status: f.status,
        finishReason: f.finish_reason,
        resumed: f.resumed,
      }),
      data,
    );
  }
}

/** At most one answer streams at a time; frames for other messages are not its business. */
export class AnswerStream<V extends StreamView> {
  private answer: StreamingAnswer<V> | null = null;

  constructor(private readonly now: () => number) {}

  /** The answer streaming now. */
  get active(): StreamingAnswer<V> | null {
    return this.answer;
  }

  start(messageId: string, view: V, sentAt: number, measured = true): StreamingAnswer<V> {
    this.answer = new StreamingAnswer(messageId, view, sentAt, measured);
    return this.answer;
  }

  /** The streaming answer, if it is message `messageId`. */
  streaming(messageId: string | null): StreamingAnswer<V> | null {
    const a = this.answer;
    return a !== null && a.messageId === messageId ? a : null;
  }

  /** It ended (done or failed): no answer streams. Returns the one that did. */
  end(): StreamingAnswer<V> | null {
    const a = this.answer;
    this.answer = null;
    return a;
  }

  /** A delta only extends the streaming answer's text; its view renders it when it likes. */
  onDelta(f: DeltaFrame): void {
    this.streaming(f.message_id)?.applyDelta(f.seq, f.text, this.now);
  }

  onSnapshot(f: SnapshotFrame): void {
    this.streaming(f.message_id)?.applySnapshot(f.content);
  }

  /** The view `view` rendered: the streaming answer if that painted its first token. */
  painted(view: V): StreamingAnswer<V> | null {
    const a = this.answer;
    return a !== null && a.view === view && a.painted(this.now) ? a : null;
  }

  /** The connection closed: a stop sent on it is void, and the answer says it waits. */
  connectionLost(): void {
    const a = this.answer;
    if (a === null) return;
    a.stopCancelled();
    a.view.setMeta(CONNECTION_LOST_META);
  }

  /** The connection opened: chat.resume from the last seq shown (null: nothing streams). */
  resume(id: string): ResumeFrame | null {
    const a = this.answer;
    if (a === null) return null;
    a.view.setMeta("");
    return resumeFrame(id, a.messageId, a.lastSeq);
  }
}
