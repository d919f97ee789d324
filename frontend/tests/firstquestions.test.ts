// @vitest-environment jsdom
import { expect, test } from "vitest";

import { attachFirstQuestions } from "../src/firstquestions.ts";

function page(withRow: boolean): { form: HTMLFormElement; input: HTMLTextAreaElement; sent: string[] } {
  document.body.innerHTML = `
    ${withRow ? '<div id="first-questions"><button type="button" data-question="Where is my order?">Where is my order?</button></div>' : ""}
    <form id="chat-form"><textarea id="chat-input"></textarea></form>`;
  const form = document.getElementById("chat-form") as HTMLFormElement;
  const input = document.getElementById("chat-input") as HTMLTextAreaElement;
  const sent: string[] = [];
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    sent.push(input.value);
  });
  return { form, input, sent };
}

test("a suggested question is asked with one click, and the suggestions go", () => {
  const { form, input, sent } = page(true);
  attachFirstQuestions(document, form, input);
  (document.querySelector("button[data-question]") as HTMLButtonElement).click();
  expect(sent).toEqual(["Where is my order?"]);
  expect((document.getElementById("first-questions") as HTMLElement).hidden).toBe(true);
});

test("typing a question of one's own also hides them", () => {
  const { form, input, sent } = page(true);
  attachFirstQuestions(document, form, input);
  input.value = "Hello";
  form.requestSubmit();
  expect(sent).toEqual(["Hello"]);
  expect((document.getElementById("first-questions") as HTMLElement).hidden).toBe(true);
});

test("a page without suggestions is left alone", () => {
  const { form, input, sent } = page(false);
  attachFirstQuestions(document, form, input);
  form.requestSubmit();
  expect(sent).toEqual([""]);
});
