import assert from "node:assert/strict";
import { test } from "vitest";

import { formatAnswerStats } from "../src/format.ts";
import {
  editFrame,
  feedbackFrame,
  parseRating,
  parseServerFrame,
  parseSource,
  regenerateFrame,
  resumeFrame,
  sendFrame,
  stopFrame,
} from "../src/protocol.ts";
import { parseHistory } from "../src/view.ts";

test("parses chat.accepted", () => {
  const f = parseServerFrame(
    JSON.stringify({ type: "chat.accepted", id: "c1", conversation_id: "conv", user_message_id: "u", assistant_message_id: "a" }),
  );
  assert.deepEqual(f, { type: "chat.accepted", id: "c1", conversation_id: "conv", user_message_id: "u", assistant_message_id: "a" });
});

test("parses chat.delta and rejects a bad seq", () => {
  assert.deepEqual(parseServerFrame('{"type":"chat.delta","message_id":"a","seq":1,"text":"<b>hi</b>"}'), {
    type: "chat.delta",
    message_id: "a",
    seq: 1,
    text: "<b>hi</b>",
  });
  assert.equal(parseServerFrame('{"type":"chat.delta","message_id":"a","seq":"1","text":"x"}'), null);
  assert.equal(parseServerFrame('{"type":"chat.delta","message_id":"a","seq":1.5,"text":"x"}'), null);
});

test("parses chat.done with usage and timings", () => {
  const f = parseServerFrame(
    JSON.stringify({
      type: "chat.done",
      message_id: "a",
      status: "stopped",
      finish_reason: "abort",
      usage: { prompt_tokens: 10, completion_tokens: 3, cached_prompt_tokens: 0 },
      timings: { queue_wait_ms: 1, ttft_ms: 42.5, total_ms: 100 },
    }),
  );
  assert.ok(f !== null && f.type === "chat.done");
  assert.equal(f.status, "stopped");
  assert.equal(f.usage.completion_tokens, 3);
  assert.equal(f.timings.ttft_ms, 42.5);
  assert.equal(parseServerFrame('{"type":"chat.done","message_id":"a","status":"weird"}'), null);
  const bare = parseServerFrame('{"type":"chat.done","message_id":"a","status":"complete"}');
  assert.ok(bare !== null && bare.type === "chat.done");
  assert.equal(bare.timings.ttft_ms, null);
  // Before FAQ answers the server sent no source: a model answer.
  assert.equal(bare.source, "model");
  assert.equal(bare.faq_entry_id, null);
});

test("parses chat.done's source and faq_entry_id", () => {
  const done = (extra: Record<string, unknown>) => {
    const f = parseServerFrame(JSON.stringify({ type: "chat.done", message_id: "a", status: "complete", finish_reason: "stop", ...extra }));
    assert.ok(f !== null && f.type === "chat.done");
    return f;
  };
  const faq = done({ source: "faq", faq_entry_id: 17 });
  assert.equal(faq.source, "faq");
  assert.equal(faq.faq_entry_id, 17);
  const model = done({ source: "model", faq_entry_id: null });
  assert.equal(model.source, "model");
  assert.equal(model.faq_entry_id, null);
  // Unknown or malformed values never make a FAQ answer, and never drop the frame.
  assert.equal(done({ source: "FAQ" }).source, "model");
  assert.equal(done({ source: null }).source, "model");
  assert.equal(done({ source: ["faq"] }).source, "model");
  assert.equal(done({ source: "faq", faq_entry_id: "17" }).faq_entry_id, null);
  assert.equal(done({ source: "faq", faq_entry_id: 1.5 }).faq_entry_id, null);
  const stopped = parseServerFrame(JSON.stringify({ type: "chat.done", message_id: "a", status: "stopped", source: "faq" }));
  assert.ok(stopped !== null && stopped.type === "chat.done");
  assert.equal(stopped.source, "faq");
});

test("parses chat.done's suggested_entries: well-formed entries, at most two, none when absent", () => {
  const done = (extra: Record<string, unknown>) => {
    const f = parseServerFrame(JSON.stringify({ type: "chat.done", message_id: "a", status: "complete", ...extra }));
    assert.ok(f !== null && f.type === "chat.done");
    return f.suggested_entries;
  };
  const reset = { entry_id: 3, question: "How do I reset my password?" };
  const close = { entry_id: 4, question: "How do I delete my account?" };
  assert.deepEqual(done({ suggested_entries: [reset, close] }), [reset, close]);
  assert.deepEqual(done({}), []);
  assert.deepEqual(done({ suggested_entries: null }), []);
  assert.deepEqual(done({ suggested_entries: "How do I reset my password?" }), []);
  assert.deepEqual(done({ suggested_entries: [{ entry_id: "3", question: "q" }, { entry_id: 3 }, { entry_id: 5, question: " " }, 7, close] }), [close]);
  assert.deepEqual(done({ suggested_entries: [reset, close, { entry_id: 9, question: "A third?" }] }), [reset, close]);
});

test("parses chat.feedback_recorded", () => {
  assert.deepEqual(parseServerFrame('{"type":"chat.feedback_recorded","id":"c1","message_id":"a","rating":"up"}'), {
    type: "chat.feedback_recorded",
    id: "c1",
    message_id: "a",
    rating: "up",
  });
  assert.deepEqual(parseServerFrame('{"type":"chat.feedback_recorded","id":"c2","message_id":"a","rating":"down","extra":1}'), {
    type: "chat.feedback_recorded",
    id: "c2",
    message_id: "a",
    rating: "down",
  });
  for (const raw of [
    '{"type":"chat.feedback_recorded","id":"c","message_id":"a","rating":"meh"}',
    '{"type":"chat.feedback_recorded","id":"c","message_id":"a"}',
    '{"type":"chat.feedback_recorded","id":"c","rating":"up"}',
    '{"type":"chat.feedback_recorded","id":null,"message_id":"a","rating":"up"}',
    '{"type":"chat.feedback_recorded","id":"c","message_id":7,"rating":"up"}',
  ]) {
    assert.equal(parseServerFrame(raw), null, raw);
  }
});

test("source and rating values", () => {
  assert.equal(parseSource("faq"), "faq");
  for (const v of ["model", undefined, null, "", "Faq", 1]) assert.equal(parseSource(v), "model", String(v));
  assert.equal(parseRating("up"), "up");
  assert.equal(parseRating("down"), "down");
  for (const v of ["", undefined, null, "UP", true]) assert.equal(parseRating(v), null, String(v));
});

test("parses chat.error with null ids", () => {
  assert.deepEqual(parseServerFrame('{"type":"chat.error","id":null,"message_id":null,"code":"bad_json","message":"Bad"}'), {
    type: "chat.error",
    id: null,
    message_id: null,
    code: "bad_json",
    message: "Bad",
    retry_after_s: null,
  });
  assert.equal(parseServerFrame('{"type":"chat.error","id":null,"message_id":null,"code":"x"}'), null);
});

test("parses the retry-after of a busy error, ignoring nonsense values", () => {
  const busy = parseServerFrame('{"type":"chat.error","id":"c","message_id":null,"code":"busy","message":"Busy","retry_after_s":5}');
  assert.equal(busy?.type === "chat.error" ? busy.retry_after_s : undefined, 5);
  for (const v of ['"5"', "-1", "null"]) {
    const f = parseServerFrame(`{"type":"chat.error","id":"c","message_id":null,"code":"busy","message":"B","retry_after_s":${v}}`);
    assert.equal(f?.type === "chat.error" ? f.retry_after_s : undefined, null, v);
  }
});

test("parses chat.snapshot and builds chat.resume", () => {
  assert.deepEqual(parseServerFrame('{"type":"chat.snapshot","message_id":"a","content":"all of it"}'), {
    type: "chat.snapshot",
    message_id: "a",
    content: "all of it",
  });
  assert.equal(parseServerFrame('{"type":"chat.snapshot","message_id":"a"}'), null);
  assert.deepEqual(resumeFrame("r1", "a", 7), { type: "chat.resume", id: "r1", message_id: "a", last_seq: 7 });
  assert.equal(resumeFrame("r1", "a", -3).last_seq, 0);
});

test("rejects non-JSON, non-objects and unknown types", () => {
  for (const raw of ["", "nope", "[]", "null", "1", '{"type":"chat.nope"}', '{"text":"x"}']) {
    assert.equal(parseServerFrame(raw), null, raw);
  }
  assert.equal(parseServerFrame(new ArrayBuffer(2)), null);
});

test("client frames", () => {
  assert.deepEqual(sendFrame("i", null, "hi"), { type: "chat.send", id: "i", conversation_id: null, text: "hi" });
  assert.deepEqual(stopFrame("i", null), { type: "chat.stop", id: "i" });
  assert.deepEqual(stopFrame("i", "m"), { type: "chat.stop", id: "i", message_id: "m" });
});

test("chat.regenerate and chat.feedback frames", () => {
  const regen = regenerateFrame("i", "m", true);
  assert.deepEqual(regen, { type: "chat.regenerate", id: "i", message_id: "m", bypass_faq: true });
  assert.equal(JSON.stringify(regen), '{"type":"chat.regenerate","id":"i","message_id":"m","bypass_faq":true}');
  assert.deepEqual(regenerateFrame("i", "m", false), { type: "chat.regenerate", id: "i", message_id: "m", bypass_faq: false });
  assert.deepEqual(feedbackFrame("i", "m", "up"), { type: "chat.feedback", id: "i", message_id: "m", rating: "up" });
  assert.equal(JSON.stringify(feedbackFrame("i", "m", "down")), '{"type":"chat.feedback","id":"i","message_id":"m","rating":"down"}');
});

test("chat.edit frame", () => {
  assert.equal(JSON.stringify(editFrame("i", "m", "new text")), '{"type":"chat.edit","id":"i","message_id":"m","text":"new text"}');
});

test("answer stats line", () => {
  assert.equal(
    formatAnswerStats({ clientTtftMs: 141.6, serverTtftMs: 97, completionTokens: 23, status: "complete" }),
    "first token 142 ms (server 97 ms) · 23 tokens",
  );
  assert.equal(formatAnswerStats({ clientTtftMs: null, serverTtftMs: null, completionTokens: 0, status: "stopped" }), "stopped");
  assert.equal(
    formatAnswerStats({ clientTtftMs: 5, serverTtftMs: null, completionTokens: 1, status: "complete", finishReason: "length" }),
    "first token 5 ms · 1 token · length limit reached",
  );
  assert.equal(
    formatAnswerStats({ clientTtftMs: 90, serverTtftMs: 60, completionTokens: 40, status: "complete", resumed: true }),
    "first token 90 ms (server 60 ms) · 40 tokens · continued on another worker",
  );
});

test("history validation", () => {
  assert.deepEqual(parseHistory(""), []);
  assert.deepEqual(
    parseHistory([
      { id: "1", role: "user", content: "q", status: "complete" },
      { id: "2", role: "system", content: "x" },
      null,
      { id: "3", role: "assistant", content: "a", status: "" },
      { id: "4", role: "agent", content: "Dana here", status: "complete", sender: "Dana" },
    ]),
    [
      { id: "1", role: "user", content: "q", status: "complete", source: "model", feedback: null, suggestions: [], sender: null },
      { id: "3", role: "assistant", content: "a", status: "complete", source: "model", feedback: null, suggestions: [], sender: null },
      { id: "4", role: "agent", content: "Dana here", status: "complete", source: "model", feedback: null, suggestions: [], sender: "Dana" },
    ],
  );
});

test("history items: suggested FAQ questions (none when absent or malformed)", () => {
  const reset = { entry_id: 3, question: "How do I reset my password?" };
  assert.deepEqual(
    parseHistory([
      { id: "1", role: "assistant", content: "a", status: "complete", suggested_entries: [reset, { entry_id: "x", question: "?" }] },
      { id: "2", role: "assistant", content: "b", status: "complete", suggested_entries: {} },
      { id: "3", role: "assistant", content: "c", status: "complete" },
    ]).map(({ id, suggestions }) => ({ id, suggestions })),
    [
      { id: "1", suggestions: [reset] },
      { id: "2", suggestions: [] },
      { id: "3", suggestions: [] },
    ],
  );
});

test("history items: source (default model) and stored rating", () => {
  assert.deepEqual(
    parseHistory([
      { id: "1", role: "user", content: "q", status: "complete", source: "model" },
      { id: "2", role: "assistant", content: "From the FAQ", status: "complete", source: "faq", feedback: "down" },
      { id: "3", role: "assistant", content: "a", status: "stopped", source: "weird", feedback: "" },
      { id: "4", role: "assistant", content: "b", status: "complete", feedback: "up" },
    ]).map(({ id, source, feedback }) => ({ id, source, feedback })),
    [
      { id: "1", source: "model", feedback: null },
      { id: "2", source: "faq", feedback: "down" },
      { id: "3", source: "model", feedback: null },
      { id: "4", source: "model", feedback: "up" },
    ],
  );
});
