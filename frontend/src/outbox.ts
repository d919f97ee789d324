// The client request waiting for its chat.accepted (or chat.error): a chat.send, a
// chat.regenerate or a chat.edit. There is at most one: the page is busy until it is answered,
// and nothing new is sent while it is busy.
//
// On a reconnect they differ: a chat.send that may not have arrived goes again (the server
// de-duplicates on the frame's id), a chat.regenerate or chat.edit never does (the server does
// not de-duplicate them: a second one would answer again); the page decides what to do instead.

import { newId } from "./ids.ts";
import { editFrame, regenerateFrame, withFullText, type ClientFrame, type SendFrame } from "./protocol.ts";

/** A chat.send, transmitted (again) until the server answers it. `V`: the question's bubble. */
export interface QueuedSend<V> {
  readonly kind: "send";
  frame: SendFrame;
  /** The question shown (pending) until the server accepts it. */
  readonly user: V;
  /** The full text the user sends (for a templated frame, `frame.text` may be absent). */
  readonly fullText: string;
  /** When the frame last went out: the browser TTFT of its answer counts from here. */
  sentAt: number;
  /** Sent on the current connection. */
  transmitted: boolean;
  /** A templated frame was already resent with its full text after chat.resend_full. */
  resent: boolean;
}

/** A chat.regenerate (sent once). `V`: the answer it restarts. */
export interface SentRegenerate<V> {
  readonly kind: "regenerate";
  readonly id: string;
  readonly messageId: string;
  readonly view: V;
  /** When the frame went out: the browser TTFT of the new answer counts from here. */
  readonly sentAt: number;
}

/** A chat.edit (sent once). `V`: the question being edited. */
export interface SentEdit<V> {
  readonly kind: "edit";
  readonly id: string;
  readonly view: V;
  /** The question's text before the edit (shown again if the edit is refused). */
  readonly oldText: string;
  readonly text: string;
  readonly sentAt: number;
}

export type AwaitedRequest<V> = QueuedSend<V> | SentRegenerate<V> | SentEdit<V>;

/** What chat.resend_full did to the queued send. */
export type ResendOutcome<V> =
  /** Resent once with its full text (now, or on the next open). */
  | { kind: "resent" }
  /** Asked for a second time: the server cannot take it; no longer queued. */
  | { kind: "given-up"; send: QueuedSend<V> };

export class Outbox<V> {
  private awaited: AwaitedRequest<V> | null = null;

  constructor(
    private readonly send: (frame: ClientFrame) => boolean,
    private readonly now: () => number,
  ) {}

  /** The request waiting for the server's answer, if any. */
  get request(): AwaitedRequest<V> | null {
    return this.awaited;
  }

  /** Queue a chat.send and transmit it now if connected (else at the next open). */
  queueSend(frame: SendFrame, fullText: string, user: V): QueuedSend<V> {
    const queued: QueuedSend<V> = { kind: "send", frame, user, transmitted: false, sentAt: this.now(), fullText, resent: false };
    this.awaited = queued;
    this.transmit(queued);
    return queued;
  }

  /** Send chat.regenerate for `messageId`; false when not connected (then nothing is awaited). */
  sendRegenerate(messageId: string, bypassFaq: boolean, view: V): boolean {
    const id = newId();
    const sentAt = this.now();
    if (!this.send(regenerateFrame(id, messageId, bypassFaq))) return false;
    this.awaited = { kind: "regenerate", id, messageId, view, sentAt };
    return true;
  }

  /** Send chat.edit of question `messageId`; false when not connected (then nothing is awaited). */
  sendEdit(messageId: string, text: string, view: V, oldText: string): boolean {
    const id = newId();
    const sentAt = this.now();
    if (!this.send(editFrame(id, messageId, text))) return false;
    this.awaited = { kind: "edit", id, view, oldText, text, sentAt };
    return true;
  }

  /** The connection opened: a queued send not transmitted on it goes now. */
  connectionOpened(): void {
    if (this.awaited?.kind === "send") this.transmit(this.awaited);
  }

  /** The connection closed: a queued send must go again on the next one. */
  connectionLost(): void {
    if (this.awaited?.kind === "send") this.awaited.transmitted = false;
  }

  /**
   * The server answered frame `id` (chat.accepted or chat.error): the request it answers,
   * no longer awaited; null if `id` is not the awaited request's.
   */
  settle(id: string | null): AwaitedRequest<V> | null {
    const r = this.awaited;
    if (r === null || id === null || requestId(r) !== id) return null;
    this.awaited = null;
    return r;
  }

  /** Stop waiting (a regenerate cut off by a reconnect is followed as a stream instead). */
  drop(): void {
    this.awaited = null;
  }

  /**
   * chat.resend_full for `id`: the server could not rebuild the templated text exactly.
   * The first time the same frame (same id, template and variables) goes again with its
   * full text; the second time it is given up. null: `id` is not the queued send.
   */
  resendFull(id: string): ResendOutcome<V> | null {
    const r = this.awaited;
    if (r === null || r.kind !== "send" || r.frame.id !== id) return null;
    if (r.resent) {
      this.awaited = null;
      return { kind: "given-up", send: r };
    }
    r.resent = true;
    r.frame = withFullText(r.frame, r.fullText);
    r.transmitted = false;
    this.transmit(r); // if the socket is down, connectionOpened sends it
    return { kind: "resent" };
  }

  private transmit(queued: QueuedSend<V>): void {
    if (queued.transmitted) return;
    queued.sentAt = this.now();
    queued.transmitted = this.send(queued.frame);
  }
}

function requestId(r: AwaitedRequest<unknown>): string {
  return r.kind === "send" ? r.frame.id : r.id;
}
