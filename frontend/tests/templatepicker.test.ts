// @vitest-environment jsdom
// The template picker on the real page markup: shown for a new conversation when templates
// exist, the draft in the message box, validation before a send, and new versions.
import { afterEach, beforeEach, expect, test, vi } from "vitest";

import { pageElements } from "../src/page.ts";
import { TemplatePicker, templatedSend } from "../src/templatepicker.ts";
import { TemplateStore, usePatchTools, type FetchResponseLike, type PromptTemplate } from "../src/templates.ts";
import { chatPageHtml } from "./helpers.ts";
import { makePatch, sha256Hex } from "../src/textpatch.ts";

usePatchTools({ makePatch, sha256Hex }); // as the chat page installs them

const TRIP: PromptTemplate = {
  id: 7,
  version: 3,
  sha256: "ab".repeat(32),
  name: "Trip",
  description: "Plan a trip",
  body: "Plan {{days}} days in {{city}}.",
  variables: [
    { name: "city", label: "City", type: "string", required: true, max_length: 10, choices: [] },
    { name: "days", label: "Days", type: "integer", required: true, max_length: null, choices: [] },
  ],
};

interface Harness {
  picker: TemplatePicker;
  store: TemplateStore;
  alerts: string[];
  state: { newConversation: boolean; busy: boolean };
  /** How often the picker said the message it would send changed. */
  draftChanges: { count: number };
  /** What the next revalidation fetch returns. */
  serve(templates: PromptTemplate[]): void;
}

function open(templates: PromptTemplate[] = [TRIP]): Harness {
  document.body.innerHTML = chatPageHtml();
  const el = pageElements(document);
  const alerts: string[] = [];
  const state = { newConversation: true, busy: false };
  const draftChanges = { count: 0 };
  let next: PromptTemplate[] = templates;
  const store = new TemplateStore({
    storage: { getItem: () => JSON.stringify({ etag: '"v1"', templates }), setItem: () => undefined },
    fetch: (): Promise<FetchResponseLike> =>
      Promise.resolve({ status: 200, headers: { get: () => '"v2"' }, json: () => Promise.resolve({ templates: next }) }),
  });
  store.load();
  const picker = new TemplatePicker(el.templates, {
    input: el.input,
    isNewConversation: () => state.newConversation,
    isBusy: () => state.busy,
    showAlert: (m) => alerts.push(m),
    draftChanged: () => draftChanges.count++,
  });
  picker.attach(store);
  return {
    picker,
    store,
    alerts,
    state,
    draftChanges,
    serve: (t) => {
      next = t;
    },
  };
}

const pickerBox = () => document.getElementById("template-picker") as HTMLElement;
const select = () => document.getElementById("template-select") as HTMLSelectElement;
const input = () => document.getElementById("chat-input") as HTMLTextAreaElement;
const field = (name: string) => document.querySelector<HTMLInputElement>(`#template-variables [data-variable="${name}"]`) as HTMLInputElement;

function choose(id: string): void {
  select().value = id;
  select().dispatchEvent(new Event("change"));
}

function type(el: HTMLInputElement, value: string): void {
  el.value = value;
  el.dispatchEvent(new Event("input", { bubbles: true }));
}

beforeEach(() => {
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
});

afterEach(() => {
  vi.restoreAllMocks();
});

test("shown for a new conversation when templates exist, with one option per template", () => {
  const h = open();
  expect(pickerBox().hidden).toBe(false);
  expect(Array.from(select().options, (o) => [o.value, o.textContent])).toEqual([
    ["", "No template"],
    ["7", "Trip"],
  ]);
  expect(h.picker.selected).toBeNull();
  open([]);
  expect(pickerBox().hidden).toBe(true);
});

test("choosing a template previews it in the message box until the user types there", () => {
  const h = open();
  choose("7");
  expect(h.picker.selected?.id).toBe(7);
  expect(Array.from(document.querySelectorAll("#template-variables label"), (l) => l.textContent)).toEqual(["City", "Days"]);
  expect(input().value).toBe("Plan {{days}} days in {{city}}.");
  type(field("city"), "Oslo");
  expect(input().value).toBe("Plan {{days}} days in Oslo.");
  input().value = "My own words";
  type(field("days"), "3");
  expect(input().value).toBe("My own words");
  choose("");
  expect(h.picker.selected).toBeNull();
  expect(input().value).toBe("My own words"); // text the user typed stays
});

test("message(): invalid variables are marked and named in the alert; valid ones render what is sent", () => {
  const h = open();
  choose("7");
  type(field("days"), "three");
  expect(h.picker.message(TRIP)).toBeNull();
  expect(h.alerts).toHaveLength(1);
  expect(field("city").getAttribute("aria-invalid")).toBe("true");
  expect(field("days").getAttribute("aria-invalid")).toBe("true");
  expect(document.activeElement).toBe(field("city"));

  type(field("city"), "Oslo");
  type(field("days"), "3");
  expect(h.picker.message(TRIP)).toEqual({ template: TRIP, variables: { city: "Oslo", days: 3 }, text: "Plan 3 days in Oslo." });
  expect(field("city").hasAttribute("aria-invalid")).toBe(false);
  input().value = "Plan 3 relaxed days in Oslo.";
  expect(h.picker.message(TRIP)?.text).toBe("Plan 3 relaxed days in Oslo.");
  input().value = "  ";
  expect(h.picker.message(TRIP)).toBeNull();
});

test("close(): once the conversation exists the picker is gone", () => {
  const h = open();
  choose("7");
  h.state.newConversation = false;
  h.picker.close();
  expect(pickerBox().hidden).toBe(true);
  expect(select().value).toBe("");
  expect(document.querySelector("#template-variables")?.children.length).toBe(0);
  expect(h.picker.selected).toBeNull();
});

test("a republished template replaces the untouched preview; after typing the old version stays", async () => {
  const h = open();
  choose("7");
  h.serve([{ ...TRIP, version: 4, sha256: "cd".repeat(32), body: "Plan {{days}} lovely days in {{city}}." }]);
  await h.store.revalidate();
  expect(h.picker.selected?.version).toBe(4);
  expect(input().value).toBe("Plan {{days}} lovely days in {{city}}.");

  input().value = "Typed by hand";
  h.serve([{ ...TRIP, version: 5, sha256: "ef".repeat(32), body: "v5" }]);
  await h.store.revalidate();
  expect(h.picker.selected?.version).toBe(4);
  expect(input().value).toBe("Typed by hand");
  expect(h.alerts).toEqual([]);
});

test("after template_unknown the current version is taken (the text kept), or the template is dropped", async () => {
  const h = open();
  choose("7");
  input().value = "Typed by hand";
  h.serve([{ ...TRIP, version: 4, sha256: "cd".repeat(32) }]);
  await h.picker.afterTemplateUnknown(7);
  expect(h.picker.selected?.version).toBe(4);
  expect(input().value).toBe("Typed by hand");
  expect(h.alerts).toEqual(["The template “Trip” was updated. Check your message, then send it again."]);

  h.serve([]);
  await h.picker.afterTemplateUnknown(7);
  expect(h.picker.selected).toBeNull();
  expect(input().value).toBe("Typed by hand");
  expect(h.alerts.at(-1)).toBe("The template “Trip” is no longer available. Your text is kept: send it without a template.");
});

test("templatedSend: the render itself goes as template + variables; an edited short text as text", async () => {
  const variables = { city: "Oslo", days: 3 };
  const exact = await templatedSend("id-1", { template: TRIP, variables, text: "Plan 3 days in Oslo." });
  expect(exact).toMatchObject({ type: "chat.send", id: "id-1", template: { id: 7, version: 3, sha256: TRIP.sha256 }, variables });
  expect(exact.result_sha256).toMatch(/^[0-9a-f]{64}$/);
  expect(exact.text ?? null).toBeNull();
  const edited = await templatedSend("id-2", { template: TRIP, variables, text: "Plan 3 days in Oslo!" });
  expect(edited).toMatchObject({ id: "id-2", template: { id: 7 }, variables, text: "Plan 3 days in Oslo!" });
});

test("a typing prefill gets the message only once every variable is valid, without marking fields", () => {
  const h = open();
  choose("7");
  expect(h.draftChanges.count).toBe(1);
  type(field("city"), "Oslo");
  expect(h.picker.draftMessage(TRIP)).toBeNull(); // days is missing
  type(field("days"), "three");
  expect(h.picker.draftMessage(TRIP)).toBeNull(); // not an integer
  expect(document.querySelectorAll("[aria-invalid=true]")).toHaveLength(0);
  expect(h.alerts).toEqual([]);
  type(field("days"), "3");
  expect(h.draftChanges.count).toBe(4);
  expect(h.picker.draftMessage(TRIP)).toEqual({ template: TRIP, variables: { city: "Oslo", days: 3 }, text: "Plan 3 days in Oslo." });
  input().value = "Plan 3 days in Oslo, by train.";
  expect(h.picker.draftMessage(TRIP)?.text).toBe("Plan 3 days in Oslo, by train."); // the user's own edit
});
