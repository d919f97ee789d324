// The request awaiting chat.accepted: a chat.send goes again after a reconnect until it is
// answered; a chat.regenerate or chat.edit is sent once; chat.resend_full resends once.
import { expect, test } from "vitest";

import { Outbox } from "../src/outbox.ts";
import type { ClientFrame, SendFrame } from "../src/protocol.ts";

function harness() {
  const sent: ClientFrame[] = [];
  const link = { up: true };
  const clock = { now: 100 };
  const outbox = new Outbox<string>(
    (f) => {
      if (!link.up) return false;
      sent.push(f);
      return true;
    },
    () => clock.now,
  );
  return { outbox, sent, link, clock };
}

const SEND: SendFrame = { type: "chat.send", id: "s1", conversation_id: null, text: "hi" };

test("a queued send goes at once, and again on each new connection until answered", () => {
  const h = harness();
  const q = h.outbox.queueSend(SEND, "hi", "bubble");
  expect(h.sent).toEqual([SEND]);
  expect(q).toMatchObject({ kind: "send", user: "bubble", transmitted: true, sentAt: 100 });
  h.outbox.connectionOpened();
  expect(h.sent).toHaveLength(1); // already on this connection
  h.outbox.connectionLost();
  h.clock.now = 250;
  h.outbox.connectionOpened();
  expect(h.sent).toEqual([SEND, SEND]); // same id: the server de-duplicates it
  expect(q.sentAt).toBe(250);
  expect(h.outbox.settle("s1")).toBe(q);
  expect(h.outbox.request).toBeNull();
});

test("a send typed while offline goes on the next open, timed from then", () => {
  const h = harness();
  h.link.up = false;
  const q = h.outbox.queueSend(SEND, "hi", "bubble");
  expect(q.transmitted).toBe(false);
  h.link.up = true;
  h.clock.now = 900;
  h.outbox.connectionOpened();
  expect(h.sent).toEqual([SEND]);
  expect(q.sentAt).toBe(900);
});

test("regenerate and edit are sent once and never again on a reconnect", () => {
  const h = harness();
  expect(h.outbox.sendRegenerate("a1", true, "answer")).toBe(true);
  const r = h.outbox.request;
  expect(r).toMatchObject({ kind: "regenerate", messageId: "a1", view: "answer", sentAt: 100 });
  expect(h.sent).toEqual([{ type: "chat.regenerate", id: r?.kind === "regenerate" ? r.id : "", message_id: "a1", bypass_faq: true }]);
  h.outbox.connectionLost();
  h.outbox.connectionOpened();
  expect(h.sent).toHaveLength(1);
  h.outbox.drop();
  expect(h.outbox.request).toBeNull();

  expect(h.outbox.sendEdit("q1", "new text", "question", "old text")).toBe(true);
  const e = h.outbox.request;
  expect(e).toMatchObject({ kind: "edit", view: "question", oldText: "old text", text: "new text" });
  expect(h.sent.at(-1)).toMatchObject({ type: "chat.edit", message_id: "q1", text: "new text" });
  h.outbox.connectionOpened();
  expect(h.sent).toHaveLength(2);
});

test("offline, a regenerate or edit is not sent and nothing is awaited", () => {
  const h = harness();
  h.link.up = false;
  expect(h.outbox.sendRegenerate("a1", false, "answer")).toBe(false);
  expect(h.outbox.sendEdit("q1", "x", "question", "y")).toBe(false);
  expect(h.outbox.request).toBeNull();
});

test("settle answers only the awaited request's id", () => {
  const h = harness();
  h.outbox.sendEdit("q1", "x", "question", "y");
  const e = h.outbox.request;
  expect(h.outbox.settle(null)).toBeNull();
  expect(h.outbox.settle("other")).toBeNull();
  expect(h.outbox.request).toBe(e);
  expect(h.outbox.settle(e?.kind === "edit" ? e.id : "")).toBe(e);
  expect(h.outbox.request).toBeNull();
});

test("chat.resend_full: resent once with the full text (same id), given up the second time", () => {
  const h = harness();
  const templated: SendFrame = {
    type: "chat.send",
    id: "t1",
    conversation_id: null,
    template: { id: 7, version: 3, sha256: "ab".repeat(32) },
    variables: { city: "Oslo" },
    patch: "@@ -1 +1 @@",
    result_sha256: "cd".repeat(32),
  };
  const q = h.outbox.queueSend(templated, "Plan a trip to Oslo!", "bubble");
  expect(h.outbox.resendFull("nope")).toBeNull();
  h.link.up = false;
  expect(h.outbox.resendFull("t1")).toEqual({ kind: "resent" });
  expect(h.sent).toHaveLength(1); // offline: goes on the next open
  h.link.up = true;
  h.outbox.connectionOpened();
  expect(h.sent).toHaveLength(2);
  expect(h.sent[1]).toMatchObject({ id: "t1", text: "Plan a trip to Oslo!", template: templated.template });
  expect(h.sent[1]).not.toHaveProperty("patch");
  expect(h.outbox.resendFull("t1")).toEqual({ kind: "given-up", send: q });
  expect(h.outbox.request).toBeNull();
});

test("resend_full is only for a queued send", () => {
  const h = harness();
  h.outbox.sendRegenerate("a1", false, "answer");
  const r = h.outbox.request;
  expect(h.outbox.resendFull(r?.kind === "regenerate" ? r.id : "")).toBeNull();
  expect(h.outbox.request).toBe(r);
});
