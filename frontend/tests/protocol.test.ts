import assert from "node:assert/strict";
import { test } from "node:test";

import { formatAnswerStats } from "../src/format.ts";
import { parseServerFrame, sendFrame, stopFrame } from "../src/protocol.ts";
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
});

test("parses chat.error with null ids", () => {
  assert.deepEqual(parseServerFrame('{"type":"chat.error","id":null,"message_id":null,"code":"bad_json","message":"Bad"}'), {
    type: "chat.error",
    id: null,
    message_id: null,
    code: "bad_json",
    message: "Bad",
  });
  assert.equal(parseServerFrame('{"type":"chat.error","id":null,"message_id":null,"code":"x"}'), null);
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

test("answer stats line", () => {
  assert.equal(
    formatAnswerStats({ clientTtftMs: 141.6, serverTtftMs: 97, completionTokens: 23, status: "complete" }),
    "first token 142 ms (server 97 ms) · 23 tokens",
  );
  assert.equal(formatAnswerStats({ clientTtftMs: null, serverTtftMs: null, completionTokens: 0, status: "stopped" }), "0 tokens · stopped");
  assert.equal(
    formatAnswerStats({ clientTtftMs: 5, serverTtftMs: null, completionTokens: 1, status: "complete", finishReason: "length" }),
    "first token 5 ms · 1 token · length limit reached",
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
    ]),
    [
      { id: "1", role: "user", content: "q", status: "complete" },
      { id: "3", role: "assistant", content: "a", status: "complete" },
    ],
  );
});
