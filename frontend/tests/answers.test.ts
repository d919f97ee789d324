import assert from "node:assert/strict";
import { test } from "vitest";

import { ASK_ASSISTANT_LABEL, canAskAssistant, FAQ_LABEL_TEXT, isFinishedAnswer, pressedStates, RATING_BUTTONS, showsSuggestions, SUGGESTIONS_LABEL } from "../src/answers.ts";

test("finished answers get the buttons; streaming, failed and pending ones do not", () => {
  assert.equal(isFinishedAnswer("complete"), true);
  assert.equal(isFinishedAnswer("stopped"), true);
  for (const s of ["streaming", "failed", "pending", "", "weird"]) assert.equal(isFinishedAnswer(s), false, s);
});

test("Ask the assistant instead: FAQ answers, newest answer only, never while busy", () => {
  const base = { source: "faq" as const, messageId: "a2", newestAnswerId: "a2", busy: false };
  assert.equal(canAskAssistant(base), true);
  assert.equal(canAskAssistant({ ...base, busy: true }), false);
  assert.equal(canAskAssistant({ ...base, newestAnswerId: "a3" }), false);
  assert.equal(canAskAssistant({ ...base, newestAnswerId: null }), false);
  assert.equal(canAskAssistant({ ...base, source: "model" }), false);
});

test("suggested FAQ questions: under the newest answer only, never while busy", () => {
  assert.equal(showsSuggestions("a2", "a2", false), true);
  assert.equal(showsSuggestions("a2", "a2", true), false);
  assert.equal(showsSuggestions("a1", "a2", false), false);
  assert.equal(showsSuggestions("a2", null, false), false);
  assert.equal(SUGGESTIONS_LABEL, "Did you mean:");
});

test("aria-pressed of the rating buttons", () => {
  assert.deepEqual(pressedStates("up"), { up: "true", down: "false" });
  assert.deepEqual(pressedStates("down"), { up: "false", down: "true" });
  assert.deepEqual(pressedStates(null), { up: "false", down: "false" });
});

test("labels and accessible names", () => {
  assert.equal(FAQ_LABEL_TEXT, "From FAQ");
  assert.equal(ASK_ASSISTANT_LABEL, "Ask the assistant instead");
  assert.deepEqual(
    RATING_BUTTONS.map((b) => [b.rating, b.label]),
    [
      ["up", "Good answer"],
      ["down", "Bad answer"],
    ],
  );
});
