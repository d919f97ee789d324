// @vitest-environment jsdom
// The message views in the log: ids, the newest answer, removing what follows an edited
// question, the one open editor, and which buttons are usable.
import { beforeEach, expect, test } from "vitest";

import { MessageLog, type MessageActions } from "../src/messagelog.ts";
import type { Rating } from "../src/protocol.ts";
import { FakeFrames } from "./helpers.ts";

let log: HTMLElement;
let calls: string[];
let state: { busy: boolean };
let messages: MessageLog;

beforeEach(() => {
  document.body.innerHTML = '<div id="chat-log"></div>';
  log = document.getElementById("chat-log") as HTMLElement;
  calls = [];
  state = { busy: false };
  const actions: MessageActions = {
    editQuestion: (id) => calls.push(`edit ${id}`),
    saveEdit: (id, text) => calls.push(`save ${id} ${text}`),
    askAssistant: (id) => calls.push(`ask ${id}`),
    rate: (id, r: Rating) => calls.push(`rate ${id} ${r}`),
    regenerate: (id) => calls.push(`regenerate ${id}`),
    askSuggested: (question) => calls.push(`suggested ${question}`),
  };
  messages = new MessageLog(log, { scheduler: new FakeFrames(), onRender: () => undefined, isBusy: () => state.busy, actions });
});

function conversation(): void {
  for (const [role, id, text] of [
    ["user", "q1", "first"],
    ["assistant", "a1", "one"],
    ["user", "q2", "second"],
    ["assistant", "a2", "two"],
  ] as const) {
    const v = messages.create(role, "complete", id, text);
    messages.append(v);
    if (role === "user") messages.addQuestion(v);
    else {
      messages.addAnswer(v);
      messages.showAnswerActions(v, "model", null);
    }
  }
}

function must<T>(v: T | undefined): T {
  if (v === undefined) throw new Error("missing");
  return v;
}

const button = (id: string, name: string) =>
  Array.from(log.querySelectorAll<HTMLButtonElement>(`[data-for="${id}"] button`)).find((b) => (b.getAttribute("aria-label") ?? b.textContent?.trim()) === name && !b.hidden);
const ids = () => Array.from(log.querySelectorAll<HTMLElement>(".message"), (m) => m.dataset["messageId"]);

test("the newest answer alone has Regenerate; buttons wait while busy", () => {
  conversation();
  expect(messages.newestAnswerId).toBe("a2");
  expect(button("a1", "Regenerate")).toBeUndefined();
  expect(button("a2", "Regenerate")?.disabled).toBe(false);
  state.busy = true;
  messages.updateControls();
  expect(button("a2", "Regenerate")?.disabled).toBe(true);
  expect(button("q1", "Edit")?.disabled).toBe(true);
  state.busy = false;
  messages.updateControls();
  button("a2", "Regenerate")?.click();
  button("q1", "Edit")?.click();
  button("a1", "Good answer")?.click();
  expect(calls).toEqual(["regenerate a2", "edit q1", "rate a1 up"]);
});

test("removeAfter drops every later message with its rows, except the one kept", () => {
  conversation();
  messages.removeAfter(must(messages.question("q2")), null);
  expect(ids()).toEqual(["q1", "a1", "q2"]);
  expect(log.querySelector('[data-for="a2"]')).toBeNull();
  expect(messages.answer("a2")).toBeUndefined();
  expect(messages.newestAnswerId).toBeNull(); // it was removed

  const a1 = messages.answer("a1");
  messages.removeAfter(must(messages.question("q1")), a1 ?? null);
  expect(ids()).toEqual(["q1", "a1"]);
  expect(messages.question("q2")).toBeUndefined();
});

test("insertAfter puts a new answer right under a question's row", () => {
  conversation();
  const q2 = must(messages.question("q2"));
  const fresh = messages.create("assistant", "streaming", "a9");
  messages.insertAfter(q2, fresh);
  const children = Array.from(log.children);
  expect(children.indexOf(fresh.element)).toBe(children.indexOf(log.querySelector('[data-for="q2"]') as Element) + 1);
});

test("one editor at a time; Save reports the text, Cancel closes it", () => {
  conversation();
  const q1 = must(messages.question("q1"));
  const q2 = must(messages.question("q2"));
  messages.openEditor(q1, "first!");
  messages.openEditor(q2, "second!");
  expect(log.querySelectorAll("form.message-editor")).toHaveLength(1);
  expect(q2.element.querySelector("textarea")?.value).toBe("second!");
  (q2.element.querySelector("form") as HTMLFormElement).requestSubmit();
  expect(calls).toEqual(["save q2 second!"]);
  messages.closeEditor();
  expect(log.querySelector("form.message-editor")).toBeNull();
});

test("renameQuestion moves a question to its stored id; setStatusById reaches any view", () => {
  const q = messages.create("user", "pending", null, "hi");
  messages.append(q);
  messages.renameQuestion(q, "q7");
  expect(messages.question("q7")).toBe(q);
  messages.renameQuestion(q, "q8");
  expect(messages.question("q7")).toBeUndefined();
  expect(messages.question("q8")).toBe(q);
  messages.setStatusById("q8", "complete");
  expect(q.element.dataset["status"]).toBe("complete");
});
