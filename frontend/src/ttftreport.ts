// chat.client_timing: each answer this page asked for reports its browser time to first token
// (request to first painted token) to the server once, for its metrics. A refusal of a report
// is not the user's business.

import type { StreamingAnswer, StreamView } from "./answerstream.ts";
import type { AwaitedReplies } from "./connection.ts";
import { newId } from "./ids.ts";
import { clientTimingFrame, type ClientFrame } from "./protocol.ts";

export class TtftReports {
  /** Answers whose report went out (or that have none the server would take). */
  private readonly done = new WeakSet<StreamingAnswer<StreamView>>();

  constructor(
    private readonly send: (frame: ClientFrame) => boolean,
    /** Ids of the reports sent on this connection (so that a refusal is recognised). */
    private readonly sent: AwaitedReplies,
  ) {}

  /**
   * Report `answer`'s time to first token, once. Called at its first paint; if the socket
   * was down then, again at the answer's end.
   */
  report(answer: StreamingAnswer<StreamView>): void {
    if (!answer.measured || this.done.has(answer) || answer.firstPaintAt === null) return;
    const id = newId();
    const frame = clientTimingFrame(id, answer.messageId, answer.firstPaintAt - answer.sentAt);
    if (frame === null) {
      this.done.add(answer); // nothing the server would take: never send it
      return;
    }
    if (!this.send(frame)) return;
    this.done.add(answer);
    this.sent.add(id);
  }

  /** chat.error `id` refuses one of this connection's reports (then it is dropped). */
  isRefusal(id: string | null): boolean {
    return this.sent.settle(id);
  }
}
