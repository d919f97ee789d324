// @vitest-environment jsdom
// chat.client_timing: the page reports each answer's time to first token (send to the first
// painted token) once, and a refusal of that report changes nothing the user sees.
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";

import { ChatController, type Transport } from "../src/controller.ts";
import { pageElements } from "../src/page.ts";
import { clientTimingFrame, CLIENT_TTFT_MAX_MS } from "../src/protocol.ts";
import { chatPageHtml, FakeFrames } from "./helpers.ts";

const CONV = "c0000000-0000-4000-8000-000000000000";
const Q1 = "q1000000-0000-4000-8000-000000000000";
const A1 = "a1000000-0000-4000-8000-000000000000";

class FakeTransport implements Transport {
  connected = true;
  sent: Record<string, unknown>[] = [];
  send(data: string): boolean {
    if (!this.connected) return false;
    this.sent.push(JSON.parse(data) as Record<string, unknown>);
    return true;
  }
  of(type: string): Record<string, unknown>[] {
    return this.sent.filter((f) => f["type"] === type);
  }
}

interface Page {
  c: ChatController;
  t: FakeTransport;
  frames: FakeFrames;
  clock: { now: number };
  receive(frame: Record<string, unknown>): void;
}

function open(data: { history?: unknown; conversationId?: string } = {}): Page {
  document.body.innerHTML = chatPageHtml(data);
  const frames = new FakeFrames();
  const clock = { now: 1000 };
  const c = new ChatController(pageElements(document), data.conversationId ?? null, { now: () => clock.now, scheduler: frames, reload: () => undefined });
  c.renderHistory(data.history ?? []);
  const t = new FakeTransport();
  c.attach(t);
  c.onConnectionState("connected");
  c.onOpen();
  return { c, t, frames, clock, receive: (f) => c.onMessage(JSON.stringify(f)) };
}

function done(messageId: string): Record<string, unknown> {
  return {
    type: "chat.done",
    message_id: messageId,
    status: "complete",
    finish_reason: "stop",
    usage: { prompt_tokens: 5, completion_tokens: 3, cached_prompt_tokens: 0 },
    timings: { queue_wait_ms: 1, ttft_ms: 40, total_ms: 90 },
    source: "model",
    faq_entry_id: null,
    resumed: false,
  };
}

const input = () => document.getElementById("chat-input") as HTMLTextAreaElement;
const alertBox = () => document.getElementById("chat-alert") as HTMLElement;
const status = (id: string) => document.querySelector<HTMLElement>(`.message[data-message-id="${id}"]`)?.dataset["status"];

/** Send a question at t=1000 and get it accepted as answer `answerId`. */
function ask(p: Page, answerId = "a9"): void {
  input().value = "Where is my parcel?";
  p.c.submit();
  const send = p.t.of("chat.send").at(-1) as Record<string, unknown>;
  p.clock.now = 1030;
  p.receive({ type: "chat.accepted", id: send["id"], conversation_id: CONV, user_message_id: "q9", assistant_message_id: answerId });
}

beforeEach(() => {
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe("chat.client_timing", () => {
  test("is sent once, when the first token is painted (at once, on its arrival), measured from the send", () => {
    const p = open();
    ask(p);
    p.clock.now = 1142.37;
    p.receive({ type: "chat.delta", message_id: "a9", seq: 1, text: "It is " });
    expect(p.frames.requests).toBe(0); // rendered without waiting for an animation frame
    const timing = p.t.of("chat.client_timing");
    expect(timing).toEqual([{ type: "chat.client_timing", id: timing[0]?.["id"], message_id: "a9", ttft_ms: 142.4 }]);
    expect(timing[0]?.["id"]).toMatch(/^[0-9a-f-]{36}$/);

    p.receive({ type: "chat.delta", message_id: "a9", seq: 2, text: "on its way." });
    p.clock.now = 1200;
    p.frames.runFrame();
    p.receive(done("a9"));
    expect(p.t.of("chat.client_timing")).toHaveLength(1);
    // the same number the answer shows under it
    const meta = document.querySelector<HTMLElement>('.message-meta[data-for="a9"]');
    expect(meta?.dataset["ttftMs"]).toBe("142");
  });

  test("a delta that renders nothing visible yet does not count as the first token", () => {
    const p = open();
    ask(p);
    p.receive({ type: "chat.delta", message_id: "a9", seq: 1, text: "\n\n" });
    p.clock.now = 1050;
    p.frames.runFrame();
    p.clock.now = 1090;
    p.receive({ type: "chat.delta", message_id: "a9", seq: 2, text: "Hello" });
    expect(p.t.of("chat.client_timing").map((f) => f["ttft_ms"])).toEqual([90]);
  });

  test("a FAQ answer (one delta, then its end) is painted and reported as it arrives", () => {
    const p = open();
    ask(p);
    p.clock.now = 1012;
    p.receive({ type: "chat.delta", message_id: "a9", seq: 1, text: "From the FAQ." });
    p.clock.now = 1020;
    p.receive(done("a9"));
    expect(p.t.of("chat.client_timing").map((f) => f["ttft_ms"])).toEqual([12]);
  });

  test("regenerate and edit answers are measured from their own frame", () => {
    const history = [
      { id: Q1, role: "user", content: "Do you ship to Norway?", status: "complete" },
      { id: A1, role: "assistant", content: "Yes.", status: "complete", source: "model", feedback: "" },
    ];
    const p = open({ history, conversationId: CONV });
    p.clock.now = 5000;
    p.c.regenerate(A1);
    const regen = p.t.of("chat.regenerate")[0] as Record<string, unknown>;
    p.receive({ type: "chat.accepted", id: regen["id"], conversation_id: CONV, user_message_id: Q1, assistant_message_id: A1 });
    p.clock.now = 5075;
    p.receive({ type: "chat.delta", message_id: A1, seq: 1, text: "Yes, we do." });
    p.receive(done(A1));

    p.clock.now = 8000;
    p.c.submitEdit(Q1, "Do you ship to Sweden?");
    const edit = p.t.of("chat.edit")[0] as Record<string, unknown>;
    p.receive({ type: "chat.accepted", id: edit["id"], conversation_id: CONV, user_message_id: Q1, assistant_message_id: A1 });
    p.clock.now = 8033;
    p.receive({ type: "chat.delta", message_id: A1, seq: 1, text: "Yes, to Sweden too." });

    expect(p.t.of("chat.client_timing").map((f) => [f["message_id"], f["ttft_ms"]])).toEqual([
      [A1, 75],
      [A1, 33],
    ]);
  });

  test("an answer followed after a reload is not reported (this page did not send it)", () => {
    const history = [
      { id: Q1, role: "user", content: "Do you ship to Norway?", status: "complete" },
      { id: A1, role: "assistant", content: "", status: "streaming", source: "model", feedback: "" },
    ];
    const p = open({ history, conversationId: CONV });
    p.receive({ type: "chat.delta", message_id: A1, seq: 1, text: "Yes." });
    p.clock.now = 1300;
    p.frames.runFrame();
    p.receive(done(A1));
    expect(p.t.of("chat.resume")).toHaveLength(1);
    expect(p.t.of("chat.client_timing")).toEqual([]);
  });

  test("a report that could not be sent goes at the answer's end", () => {
    const p = open();
    ask(p);
    p.t.connected = false;
    p.clock.now = 1060;
    p.receive({ type: "chat.delta", message_id: "a9", seq: 1, text: "Hi" });
    expect(p.t.sent.filter((f) => f["type"] === "chat.client_timing")).toEqual([]);
    p.t.connected = true;
    p.clock.now = 1500;
    p.receive(done("a9"));
    expect(p.t.of("chat.client_timing").map((f) => f["ttft_ms"])).toEqual([60]);
  });

  test("its refusal shows nothing and fails nothing, even while the answer streams", () => {
    const p = open();
    ask(p);
    p.receive({ type: "chat.delta", message_id: "a9", seq: 1, text: "Hi" });
    p.clock.now = 1060;
    p.frames.runFrame();
    const timing = p.t.of("chat.client_timing")[0] as Record<string, unknown>;
    p.receive({ type: "chat.error", id: timing["id"], message_id: "a9", code: "invalid", message: "already reported", retry_after_s: null });
    expect(alertBox().hidden).toBe(true);
    expect(status("a9")).toBe("streaming");
    p.receive(done("a9"));
    expect(status("a9")).toBe("complete");
  });
});

describe("clientTimingFrame", () => {
  test("takes what the server takes, rounded to 0.1 ms", () => {
    expect(clientTimingFrame("i", "m", 99.96)).toEqual({ type: "chat.client_timing", id: "i", message_id: "m", ttft_ms: 100 });
    expect(clientTimingFrame("i", "m", CLIENT_TTFT_MAX_MS)?.ttft_ms).toBe(600_000);
    for (const bad of [0, 0.04, -3, CLIENT_TTFT_MAX_MS + 1, Number.NaN, Number.POSITIVE_INFINITY]) expect(clientTimingFrame("i", "m", bad)).toBeNull();
  });
});
