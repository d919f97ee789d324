// @vitest-environment jsdom
import { afterEach, expect, test, vi } from "vitest";

import { AlertBanner } from "../src/alerts.ts";

afterEach(() => {
  vi.useRealTimers();
});

function banner(): [AlertBanner, HTMLElement] {
  document.body.innerHTML = '<div id="chat-alert" role="alert" hidden></div>';
  const el = document.getElementById("chat-alert") as HTMLElement;
  return [new AlertBanner(el), el];
}

test("show and clear", () => {
  const [alert, el] = banner();
  alert.show("Not connected");
  expect([el.hidden, el.textContent]).toEqual([false, "Not connected"]);
  alert.clear();
  expect([el.hidden, el.textContent]).toEqual([true, ""]);
});

test("an error shows its message, else its code", () => {
  const [alert, el] = banner();
  alert.showError({ code: "busy", message: "", retry_after_s: null });
  expect(el.textContent).toBe("Error: busy");
  alert.showError({ code: "busy", message: "Too many", retry_after_s: 0 });
  expect(el.textContent).toBe("Too many");
  expect(el.querySelector('[role="timer"]')).toBeNull();
});

test("a retry-after counts down in a silent timer, then clears; a new message stops it", () => {
  vi.useFakeTimers();
  const [alert, el] = banner();
  alert.showError({ code: "busy", message: "Busy.", retry_after_s: 1.2 });
  expect(el.textContent).toBe("Busy. (2 s)");
  expect(el.dataset["retryIn"]).toBe("2");
  expect(el.querySelector('[role="timer"]')?.getAttribute("aria-live")).toBe("off");
  vi.advanceTimersByTime(1000);
  expect(el.textContent).toBe("Busy. (1 s)");
  vi.advanceTimersByTime(1000);
  expect(el.hidden).toBe(true);
  expect(el.dataset["retryIn"]).toBeUndefined();

  alert.showCountdown("Busy again.", 5);
  alert.show("Something else");
  expect(el.dataset["retryIn"]).toBeUndefined();
  vi.advanceTimersByTime(10_000);
  expect([el.hidden, el.textContent]).toEqual([false, "Something else"]);
});
