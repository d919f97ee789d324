// Typing prefill from the page: when chat.draft goes out (debounced, at the start of a
// question and again after a paste), and when it does not.
import { expect, test } from "vitest";

import { DRAFT_DEBOUNCE_MS, DraftPrefill, type DraftTimers } from "../src/draftprefill.ts";
import type { ClientFrame, TemplateRef } from "../src/protocol.ts";

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

interface Page {
  /** False: an answer streams (or a template's variables are missing). */
  allowed: boolean;
  conversationId: string | null;
  template: TemplateRef | null;
  text: string;
}

function harness(start: Partial<Page> = {}) {
  const sent: ClientFrame[] = [];
  const timers = new FakeTimers();
  let connected = true;
  const target: Page = { allowed: true, conversationId: "c1", template: null, text: "", ...start };
  const drafts = new DraftPrefill(
    (frame) => {
      if (!connected) return false;
      sent.push(frame);
      return true;
    },
    () => (target.allowed ? { conversationId: target.conversationId, template: target.template, text: target.text } : null),
    timers,
  );
  const type = (text: string) => {
    target.text = text;
    drafts.typed();
  };
  return { sent, timers, drafts, target, type, disconnect: () => (connected = false), connect: () => (connected = true) };
}

test("a draft goes out once typing pauses, as typed, for the conversation", () => {
  const { sent, timers, type } = harness();
  type("and how long does");
  timers.advance(DRAFT_DEBOUNCE_MS - 1);
  type("and how long does it take ");
  timers.advance(DRAFT_DEBOUNCE_MS - 1);
  expect(sent).toEqual([]); // still typing
  timers.advance(1);
  expect(sent).toEqual([{ type: "chat.draft", id: expect.any(String), conversation_id: "c1", text: "and how long does it take " }]);
});

test("more typing sends nothing more; a paste (the draft grew by 200 characters) sends it again", () => {
  const { sent, timers, type } = harness();
  type("and how long does it take");
  timers.advance(DRAFT_DEBOUNCE_MS);
  type("and how long does it take to arrive?");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent).toHaveLength(1);
  const pasted = "and how long does it take to arrive? " + "order details ".repeat(20);
  type(pasted);
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent.map((f) => (f as { text: string }).text)).toEqual(["and how long does it take", pasted]);
});

test("short drafts and busy pages send nothing; a send starts the next question afresh", () => {
  const { sent, timers, drafts, target, type } = harness();
  type("thanks");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent).toEqual([]); // not worth a prefill
  target.allowed = false; // an answer streams
  type("and how long does it take");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent).toEqual([]);
  target.allowed = true;
  type("and how long does it take");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent).toHaveLength(1);
  drafts.reset(); // sent: the next question's first draft goes out again
  target.conversationId = null; // and in a new chat, without a conversation
  type("where is my parcel please");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent.at(-1)).toMatchObject({ conversation_id: null, text: "where is my parcel please" });
});

test("a draft the socket could not take is tried again at the next pause", () => {
  const { sent, timers, type, disconnect, connect } = harness();
  disconnect();
  type("and how long does it take");
  timers.advance(DRAFT_DEBOUNCE_MS);
  connect();
  type("and how long does it take?");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent).toHaveLength(1);
});

test("a template's first message goes out with its reference, and again for another template", () => {
  const refund: TemplateRef = { id: 3, version: 2, sha256: "a".repeat(64) };
  const { sent, timers, target, type } = harness({ conversationId: null, template: refund });
  type("My order A-1042 has not arrived. I would like a refund.");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent).toEqual([
    { type: "chat.draft", id: expect.any(String), conversation_id: null, text: "My order A-1042 has not arrived. I would like a refund.", template: refund },
  ]);
  target.template = { id: 4, version: 1, sha256: "b".repeat(64) }; // another template: its prompt differs
  type("My order A-1042 arrived damaged. I would like a refund.");
  timers.advance(DRAFT_DEBOUNCE_MS);
  expect(sent).toHaveLength(2);
  expect(sent[1]).toMatchObject({ template: { id: 4, version: 1 } });
});
