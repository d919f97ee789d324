// Typing prefill from the page: when chat.draft goes out (debounced, at the start of a
// question and again after a paste), and when it does not.
import { expect, test } from "vitest";

import { DRAFT_DEBOUNCE_MS, DraftPrefill, type DraftTimers } from "../src/draftprefill.ts";
import type { ClientFrame } from "../src/protocol.ts";

class FakeTimers implements DraftTimers {
  now = 0;
  private pending = new Map<number, { at: number; callback: () => void }>();
  private next = 1;
  set(callback: () => void, ms: number): unknown {
    const handle = this.next++;
    this.pending.set(handle, { at: this.now + ms, callback });
    return handle;
  }
  clear(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  advance(ms: number): void {
    this.now += ms;
    for (const [handle, { at, callback }] of [...this.pending]) {
      if (at <= this.now) {
        this.pending.delete(handle);
        callback();
      }
    }
  }
}

function harness(target = { allowed: true, conversationId: "c1" as string | null }) {
  const sent: ClientFrame[] = [];
  const timers = new FakeTimers();
  let connected = true;
  const drafts = new DraftPrefill(
    (frame) => {
      if (!connected) return false;
      sent.push(frame);
      return true;
    },
    () => target,
    timers,
  );
  return { sent, timers, drafts, target, disconnect: () => (connected = false), connect: () => (connected = true) };
}

test("a draft goes out once typing pauses, as typed, for the conversation", () => {
  const { sent, timers, drafts } = harness();
  drafts.typed("and how long does");
  timers.advance(DRAFT_DEBOUNCE_MS - 1);
  drafts.typed("and how long does it take ");
  timers.advance(DRAFT_DEBOUNCE_MS - 1);
  expect(sent).toEqual([]); // still typing
  timers.advance(1);
  expect(sent).toEqual([{ type: "chat.draft", id: expect.any(String), conversation_id: "c1", text: "and how long does it take " }]);
});

test("more typing sends nothing more; a paste (the draft grew by 200 characters) sends it again", () => {
  const { sent, timers, drafts } = harness();
  drafts.typed("and how long does it take");
  timers.advance(DRAFT_DEBOUNCE_MS);
  drafts.typed("and how long does it take to arrive?");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent).toHaveLength(1);
  const pasted = "and how long does it take to arrive? " + "order details ".repeat(20);
  drafts.typed(pasted);
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent.map((f) => (f as { text: string }).text)).toEqual(["and how long does it take", pasted]);
});

test("short drafts, busy pages and templates send nothing; a send starts the next question afresh", () => {
  const { sent, timers, drafts, target } = harness();
  drafts.typed("thanks");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent).toEqual([]); // not worth a prefill
  target.allowed = false; // an answer streams, or a template is being filled in
  drafts.typed("and how long does it take");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent).toEqual([]);
  target.allowed = true;
  drafts.typed("and how long does it take");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent).toHaveLength(1);
  drafts.reset(); // sent: the next question's first draft goes out again
  target.conversationId = null; // and in a new chat, without a conversation
  drafts.typed("where is my parcel please");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent.at(-1)).toMatchObject({ conversation_id: null, text: "where is my parcel please" });
});

test("a draft the socket could not take is tried again at the next pause", () => {
  const { sent, timers, drafts, disconnect, connect } = harness();
  disconnect();
  drafts.typed("and how long does it take");
  timers.advance(DRAFT_DEBOUNCE_MS);
  connect();
  drafts.typed("and how long does it take?");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent).toHaveLength(1);
});
