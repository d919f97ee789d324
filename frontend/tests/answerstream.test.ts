// The streaming answer: delta seq (repeats dropped, gaps shown), snapshot, resume after a
// reconnect, stop, and the first-token times, without a DOM.
import { afterEach, beforeEach, expect, test, vi } from "vitest";

import { AnswerStream, CONNECTION_LOST_META, type StreamView } from "../src/answerstream.ts";
import type { DoneFrame } from "../src/protocol.ts";

class FakeView implements StreamView {
  text = "";
  meta: [string, Record<string, string>][] = [];
  append(text: string): void {
    this.text += text;
  }
  setText(text: string): void {
    this.text = text;
  }
  setMeta(line: string, data: Record<string, string> = {}): void {
    this.meta.push([line, data]);
  }
}

let warn: ReturnType<typeof vi.spyOn>;
beforeEach(() => {
  warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** A complete model answer's chat.done: 23 tokens, server TTFT 97 ms, with `fields` over it. */
function doneFrame(fields: Partial<DoneFrame> = {}): DoneFrame {
  return {
    type: "chat.done",
    message_id: "a",
    status: "complete",
    finish_reason: "stop",
    usage: { prompt_tokens: 5, completion_tokens: 23, cached_prompt_tokens: 0 },
    timings: { queue_wait_ms: 1, ttft_ms: 97, total_ms: 300 },
    source: "model",
    faq_entry_id: null,
    offer_person: false,
    resumed: false,
    hops: null,
    suggested_entries: [],
    ...fields,
  };
}

function harness() {
  const clock = { now: 1000 };
  const stream = new AnswerStream<FakeView>(() => clock.now);
  const view = new FakeView();
  return { clock, stream, view };
}

const delta = (seq: number, text: string, message_id = "a") => ({ type: "chat.delta" as const, message_id, seq, text });

test("deltas extend the text in seq order; repeats are dropped, a gap is warned about and shown", () => {
  const { stream, view } = harness();
  stream.start("a", view, 1000);
  stream.onDelta(delta(1, "Hel"));
  stream.onDelta(delta(2, "lo"));
  stream.onDelta(delta(2, "lo"));
  stream.onDelta(delta(1, "Hel"));
  expect(view.text).toBe("Hello");
  expect(warn).not.toHaveBeenCalled();
  stream.onDelta(delta(4, "!"));
  expect(view.text).toBe("Hello!");
  expect(warn).toHaveBeenCalledWith("chat: delta gap, expected seq 3, got 4");
  expect(stream.active?.lastSeq).toBe(4);
});

test("frames for another message are not the stream's", () => {
  const { stream, view } = harness();
  stream.onDelta(delta(1, "nothing streams"));
  stream.start("a", view, 1000);
  stream.onDelta(delta(1, "other", "b"));
  stream.onSnapshot({ type: "chat.snapshot", message_id: "b", content: "other" });
  expect(view.text).toBe("");
  expect(stream.streaming("b")).toBeNull();
  expect(stream.streaming("a")).toBe(stream.active);
});

test("a snapshot replaces the text and ends the replay: later deltas are dropped", () => {
  const { stream, view } = harness();
  stream.start("a", view, 1000);
  stream.onDelta(delta(1, "Hel"));
  stream.onSnapshot({ type: "chat.snapshot", message_id: "a", content: "Hello, all of it" });
  stream.onDelta(delta(2, "lo"));
  expect(view.text).toBe("Hello, all of it");
  expect(stream.active?.lastSeq).toBe(Number.MAX_SAFE_INTEGER);
});

test("resume asks for what follows the last seq shown; a lost connection says so and voids the stop", () => {
  const { stream, view } = harness();
  expect(stream.resume("r0")).toBeNull();
  const a = stream.start("a", view, 1000);
  stream.onDelta(delta(1, "x"));
  stream.onDelta(delta(2, "y"));
  a.stopSent("s1");
  expect(a.stopping).toBe(true);
  expect(a.isStopFrame("s1")).toBe(true);
  expect(a.isStopFrame(null)).toBe(false);
  stream.connectionLost();
  expect(a.stopping).toBe(false);
  expect(view.meta.at(-1)).toEqual([CONNECTION_LOST_META, {}]);
  expect(stream.resume("r1")).toEqual({ type: "chat.resume", id: "r1", message_id: "a", last_seq: 2 });
  expect(view.meta.at(-1)).toEqual(["", {}]);
});

test("the first token is the first visible one: blank deltas and renders before it do not count", () => {
  const { clock, stream, view } = harness();
  const a = stream.start("a", view, 1000);
  stream.onDelta(delta(1, "\n\n"));
  clock.now = 1010;
  expect(stream.painted(view)).toBeNull();
  clock.now = 1020;
  stream.onDelta(delta(2, "Hi"));
  expect(a.firstDeltaAt).toBe(1020);
  expect(a.clientTtftMs).toBe(20); // received, not painted yet
  expect(stream.painted(new FakeView())).toBeNull(); // another view
  clock.now = 1036;
  expect(stream.painted(view)).toBe(a);
  clock.now = 1050;
  expect(stream.painted(view)).toBeNull(); // once
  expect(a.firstPaintAt).toBe(1036);
  expect(a.clientTtftMs).toBe(36);
});

test("stats under the finished answer: browser and server TTFT as text and data", () => {
  const { clock, stream, view } = harness();
  const a = stream.start("a", view, 1000);
  clock.now = 1141.6;
  stream.onDelta(delta(1, "Hi"));
  const done = doneFrame({
    hops: {
      admitted_ms: 0.4,
      stored_ms: 3.1,
      queued_ms: 5,
      relay_first_delta_ms: 120,
      socket_first_delta_ms: 121,
      worker_prompt_ms: 2,
      worker_engine_first_token_ms: 95,
      worker_first_delta_sent_ms: 97,
    },
  });
  a.showStats(done);
  const [line, data] = view.meta.at(-1) ?? ["", {}];
  // the first delta's arrival from the send, and the server's hops, for the bench to read
  expect(data).toEqual({ ttftMs: "142", serverTtftMs: "97", firstDeltaMs: "141.60", hops: JSON.stringify(done.hops) });
  expect(line).toContain("142 ms");
  expect(line).toContain("23 tokens");
  expect(stream.end()).toBe(a);
  expect(stream.active).toBeNull();
});

test("an answer followed after a reload shows no browser first-token time: it was not measured from a send", () => {
  const { clock, stream, view } = harness();
  // the page reloaded mid-answer and follows it from now: the user pressed Send on an earlier page
  const a = stream.start("a", view, 1000, false);
  clock.now = 1079;
  stream.onDelta(delta(1, "Hi"));
  clock.now = 1080;
  stream.painted(view);
  expect(a.clientTtftMs).toBeNull();
  const done = doneFrame({ timings: { queue_wait_ms: 1, ttft_ms: 217, total_ms: 900 } });
  a.showStats(done);
  const [line, data] = view.meta.at(-1) ?? ["", {}];
  expect(data).toEqual({ serverTtftMs: "217" });
  expect(line).toBe("first token (server) 217 ms · 23 tokens");
  expect(line).not.toContain("80 ms");
});
