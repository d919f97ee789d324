// The page's end of the chat socket: frames go out as JSON through a Transport
// (ReconnectingSocket in the browser, a fake in tests), and the ids of frames whose replies
// can only come on the current connection are dropped when it closes.

import type { ClientFrame } from "./protocol.ts";

/** The transport the page needs; ReconnectingSocket implements it. */
export interface Transport {
  /** Send one frame; false when nothing was sent (not connected). */
  send(data: string): boolean;
}

/** Ids of frames sent on the current connection whose reply is still awaited. */
export class AwaitedReplies {
  private readonly ids = new Set<string>();

  add(id: string): void {
    this.ids.add(id);
  }

  /** The reply to `id` came: true if it was awaited here (and is no longer). */
  settle(id: string | null): boolean {
    return id !== null && this.ids.delete(id);
  }

  clear(): void {
    this.ids.clear();
  }
}

export class Connection {
  private transport: Transport | null = null;
  private openedBefore = false;
  private readonly replySets: AwaitedReplies[] = [];

  attach(transport: Transport): void {
    this.transport = transport;
  }

  /** Send a frame; false (nothing sent) before `attach` or while not connected. */
  send(frame: ClientFrame): boolean {
    return this.transport?.send(JSON.stringify(frame)) === true;
  }

  /** The socket opened: true when it had been open before (a reconnect). */
  opened(): boolean {
    const again = this.openedBefore;
    this.openedBefore = true;
    return again;
  }

  /** The socket closed: replies to frames sent on it cannot come any more. */
  closed(): void {
    for (const replies of this.replySets) replies.clear();
  }

  /** A set of awaited reply ids that this connection empties when it closes. */
  awaitedReplies(): AwaitedReplies {
    const replies = new AwaitedReplies();
    this.replySets.push(replies);
    return replies;
  }
}
