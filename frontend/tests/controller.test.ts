// @vitest-environment jsdom
// The page controller against the real page markup (web/chat.html) with a fake transport:
// what it sends, and what the page shows for the server's frames.
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";

import { ChatController, type Transport } from "../src/controller.ts";
import { ConversationList } from "../src/conversations.ts";
import { conversationNav, pageElements } from "../src/page.ts";
import { chatPageHtml, dangerousNodes, FakeFrames } from "./helpers.ts";

const CONV = "c0000000-0000-4000-8000-000000000000";
const Q1 = "q1000000-0000-4000-8000-000000000000";
const A1 = "a1000000-0000-4000-8000-000000000000";
const Q2 = "q2000000-0000-4000-8000-000000000000";
const A2 = "a2000000-0000-4000-8000-000000000000";

class FakeTransport implements Transport {
  connected = true;
  sent: Record<string, unknown>[] = [];
  send(data: string): boolean {
    if (!this.connected) return false;
    this.sent.push(JSON.parse(data) as Record<string, unknown>);
    return true;
  }
  last(type?: string): Record<string, unknown> {
    const frames = type === undefined ? this.sent : this.sent.filter((f) => f["type"] === type);
    const f = frames.at(-1);
    if (f === undefined) throw new Error(`nothing sent${type ? ` of type ${type}` : ""}`);
    return f;
  }
}

interface Page {
  c: ChatController;
  t: FakeTransport;
  frames: FakeFrames;
  reloads: number;
  clock: { now: number };
  receive(frame: Record<string, unknown>): void;
}

const HISTORY = [
  { id: Q1, role: "user", content: "Do you ship to Norway?", status: "complete" },
  { id: A1, role: "assistant", content: "Yes, we **do**.", status: "complete", source: "model", feedback: "" },
  { id: Q2, role: "user", content: "How long does it take?", status: "complete" },
  { id: A2, role: "assistant", content: "About *3 days*.", status: "complete", source: "model", feedback: "up" },
];

function open(data: { history?: unknown; conversationId?: string; conversations?: unknown } = {}): Page {
  document.body.innerHTML = chatPageHtml(data);
  const frames = new FakeFrames();
  const clock = { now: 1000 };
  const page = { reloads: 0 } as Page;
  const conv = data.conversationId ?? "";
  const c = new ChatController(pageElements(document), conv === "" ? null : conv, {
    now: () => clock.now,
    scheduler: frames,
    reload: () => {
      page.reloads += 1;
    },
  });
  const nav = conversationNav(document);
  if (nav !== null) c.attachConversations(new ConversationList(nav, conv === "" ? null : conv), data.conversations ?? []);
  c.renderHistory(data.history ?? []);
  const t = new FakeTransport();
  c.attach(t);
  c.onConnectionState("connected");
  c.onOpen();
  return Object.assign(page, { c, t, frames, clock, receive: (f: Record<string, unknown>) => c.onMessage(JSON.stringify(f)) });
}

const log = () => document.getElementById("chat-log") as HTMLElement;
const input = () => document.getElementById("chat-input") as HTMLTextAreaElement;
const sendButton = () => document.getElementById("chat-send") as HTMLButtonElement;
const stopButton = () => document.getElementById("chat-stop") as HTMLButtonElement;
const alertBox = () => document.getElementById("chat-alert") as HTMLElement;
const message = (id: string) => log().querySelector<HTMLElement>(`.message[data-message-id="${id}"]`);
const bodyText = (id: string) => message(id)?.querySelector(".message-body")?.textContent ?? null;
const messageIds = () => Array.from(log().querySelectorAll<HTMLElement>(".message"), (m) => `${m.dataset["role"]}:${m.dataset["messageId"] ?? "?"}`);

/** The accessible name of a button: aria-label, else its text. */
function accessibleName(b: HTMLElement): string {
  return b.getAttribute("aria-label") ?? (b.textContent ?? "").trim();
}

function buttonsNamed(root: ParentNode, name: string): HTMLButtonElement[] {
  return Array.from(root.querySelectorAll<HTMLButtonElement>("button")).filter((b) => accessibleName(b) === name && !b.hidden);
}

function actionsFor(id: string): HTMLElement | null {
  return log().querySelector<HTMLElement>(`.message-actions[data-for="${id}"]`);
}

function done(messageId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
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
    ...extra,
  };
}

function press(el: HTMLElement, key: string, init: KeyboardEventInit = {}): KeyboardEvent {
  const ev = new KeyboardEvent("keydown", { key, bubbles: true, cancelable: true, ...init });
  el.dispatchEvent(ev);
  return ev;
}

beforeEach(() => {
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
});

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

describe("page contract and keyboard", () => {
  test("labelled controls, the log, and the conversation nav are where the tests expect them", () => {
    open();
    expect(log().getAttribute("role")).toBe("log");
    expect(document.querySelector('label[for="chat-input"]')?.textContent).toBe("Message");
    expect(accessibleName(sendButton())).toBe("Send");
    expect(accessibleName(stopButton())).toBe("Stop");
    expect(document.querySelector('nav[aria-label="Conversations"]')).not.toBeNull();
    for (const id of ["chat-form", "chat-alert", "connection-status", "template-picker", "template-select", "template-variables"]) {
      expect(document.getElementById(id), id).not.toBeNull();
    }
  });

  test("Enter sends, Shift+Enter is a new line, Enter while composing is ignored", () => {
    const p = open();
    input().value = "line one";
    expect(press(input(), "Enter", { shiftKey: true }).defaultPrevented).toBe(false);
    expect(press(input(), "Enter", { isComposing: true }).defaultPrevented).toBe(false);
    expect(p.t.sent).toEqual([]);
    expect(press(input(), "Enter").defaultPrevented).toBe(true);
    expect(p.t.last()).toMatchObject({ type: "chat.send", conversation_id: null, text: "line one" });
    expect(sendButton().disabled).toBe(true);
  });
});

describe("sending and streaming", () => {
  test("a send streams into a new answer: the first token at once, the deltas of one frame after it once, only in that answer's body", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    input().value = "And to Sweden?";
    p.c.submit();
    const send = p.t.last("chat.send");
    expect(send).toMatchObject({ conversation_id: CONV, text: "And to Sweden?" });
    p.receive({ type: "chat.accepted", id: send["id"], conversation_id: CONV, user_message_id: "q3", assistant_message_id: "a3" });
    expect(input().value).toBe("");
    expect(stopButton().disabled).toBe(false);

    const answer = message("a3") as HTMLElement;
    const body = answer.querySelector(".message-body") as HTMLElement;
    expect(answer.dataset["status"]).toBe("streaming");

    // Everything the stream changes must be inside the streaming answer's body (but for
    // the end of its waiting stage, at the first token).
    expect(answer.dataset["stage"]).toBe("queued");
    p.receive({ type: "chat.started", message_id: "a3" });
    expect(answer.dataset["stage"]).toBe("prefilling");
    const outside: Node[] = [];
    const stages: (string | null)[] = [];
    const observer = new MutationObserver((records) => {
      for (const r of records) {
        if (r.attributeName === "data-stage") stages.push(answer.getAttribute("data-stage"));
        else if (!body.contains(r.target)) outside.push(r.target);
      }
    });
    observer.observe(log(), { childList: true, subtree: true, characterData: true, attributes: true });
    const before = Array.from(log().children);

    p.clock.now = 1100;
    for (const [i, text] of ["Yes", ", we ", "ship ", "to **Sweden**", "."].entries()) p.receive({ type: "chat.delta", message_id: "a3", seq: i + 1, text });
    expect(body.textContent).toBe("Yes"); // the first token at once, the rest at the frame
    p.clock.now = 1116;
    p.frames.runFrame();
    expect(body.innerHTML).toBe("<p>Yes, we ship to <strong>Sweden</strong>.</p>");
    const stats = p.c["messages"].answer("a3")?.renderStats;
    expect(stats?.renders).toBe(2);

    p.receive({ type: "chat.delta", message_id: "a3", seq: 6, text: "\n\nMore." });
    p.frames.runFrame();
    observer.takeRecords().forEach((r) => {
      if (r.attributeName === "data-stage") stages.push(answer.getAttribute("data-stage"));
      else if (!body.contains(r.target)) outside.push(r.target);
    });
    observer.disconnect();
    expect(outside).toEqual([]);
    expect(stages).toEqual([null]); // once, at the first token
    expect(answer.dataset["stage"]).toBeUndefined();
    expect(Array.from(log().children)).toEqual(before); // the other messages are the same nodes

    p.clock.now = 1200;
    p.receive(done("a3"));
    expect(answer.dataset["status"]).toBe("complete");
    const meta = log().querySelector<HTMLElement>('.message-meta[data-for="a3"]');
    expect(meta?.dataset["ttftMs"]).toBe("100"); // from the send (1000) to the first render (1100, at its arrival)
    expect(meta?.dataset["serverTtftMs"]).toBe("40");
    expect(stopButton().disabled).toBe(true);
    expect(sendButton().disabled).toBe(false);
  });

  test("chat.done renders what is still waiting for a frame", () => {
    const p = open();
    input().value = "hi";
    p.c.submit();
    p.receive({ type: "chat.accepted", id: p.t.last()["id"], conversation_id: CONV, user_message_id: "q", assistant_message_id: "a" });
    p.receive({ type: "chat.delta", message_id: "a", seq: 1, text: "All at *once*" });
    p.receive(done("a"));
    expect(message("a")?.querySelector(".message-body")?.innerHTML).toBe("<p>All at <em>once</em></p>");
    expect(p.frames.pending).toBe(0);
  });

  test("model output in an answer stays inert", () => {
    const p = open();
    input().value = "x";
    p.c.submit();
    p.receive({ type: "chat.accepted", id: p.t.last()["id"], conversation_id: CONV, user_message_id: "q", assistant_message_id: "a" });
    p.receive({ type: "chat.delta", message_id: "a", seq: 1, text: '<img src=x onerror=alert(1)> [x](javascript:alert(1)) <script>alert(1)</script>' });
    p.receive(done("a"));
    const body = message("a")?.querySelector(".message-body") as HTMLElement;
    expect(body.textContent).toContain("<img src=x onerror=alert(1)>");
    expect(dangerousNodes(body)).toEqual([]);
    expect(body.querySelector("a")?.hasAttribute("href")).toBe(false);
  });

  test("a question is plain text: markdown and HTML in it are shown as typed", () => {
    const p = open();
    input().value = "**not bold** <b>nor this</b>";
    p.c.submit();
    const user = log().querySelector<HTMLElement>('.message[data-role="user"]');
    expect(user?.querySelector(".message-body")?.textContent).toBe("**not bold** <b>nor this</b>");
    expect(user?.querySelector("strong, b")).toBeNull();
    expect(p.t.sent.length).toBe(1);
  });

  test("history answers are rendered as markdown at once", () => {
    open({ history: HISTORY, conversationId: CONV });
    expect(message(A1)?.querySelector(".message-body strong")?.textContent).toBe("do");
    expect(message(A2)?.querySelector(".message-body em")?.textContent).toBe("3 days");
    expect(bodyText(Q1)).toBe("Do you ship to Norway?");
  });
});

describe("conversation list", () => {
  test("the first chat.accepted of a new conversation adds it on top, titled like the server, current", () => {
    const p = open({ conversations: [{ id: CONV, title: "Older one", updated_at: "2026-11-28T10:00:00+00:00" }] });
    const question = "  Could you tell me   how long shipping to Tromsø usually takes in winter?  ";
    input().value = question;
    p.c.submit();
    const NEW = "c1000000-0000-4000-8000-000000000000";
    p.receive({ type: "chat.accepted", id: p.t.last()["id"], conversation_id: NEW, user_message_id: "q", assistant_message_id: "a" });
    const links = Array.from(document.querySelectorAll<HTMLAnchorElement>('nav[aria-label="Conversations"] a'));
    expect(links.map((a) => [a.getAttribute("href"), a.textContent, a.getAttribute("aria-current")])).toEqual([
      [`/c/${NEW}/`, "Could you tell me how long shipping to Tromsø usually takes…", "page"],
      [`/c/${CONV}/`, "Older one", null],
    ]);
    expect(location.pathname).toBe(`/c/${NEW}/`);
  });

  test("the open conversation is marked and moves to the top when asked again", () => {
    const other = "c2000000-0000-4000-8000-000000000000";
    const p = open({
      history: HISTORY,
      conversationId: CONV,
      conversations: [
        { id: other, title: "Other", updated_at: "2026-11-29T10:00:00+00:00" },
        { id: CONV, title: "Do you ship to Norway?", updated_at: "2026-11-28T10:00:00+00:00" },
      ],
    });
    const current = () => document.querySelector('nav a[aria-current="page"]')?.getAttribute("href");
    expect(current()).toBe(`/c/${CONV}/`);
    input().value = "Thanks!";
    p.c.submit();
    p.receive({ type: "chat.accepted", id: p.t.last()["id"], conversation_id: CONV, user_message_id: "q3", assistant_message_id: "a3" });
    expect(Array.from(document.querySelectorAll("nav a"), (a) => a.textContent)).toEqual(["Do you ship to Norway?", "Other"]);
    expect(current()).toBe(`/c/${CONV}/`);
  });
});

describe("regenerate", () => {
  test("only the newest answer has Regenerate; it sends chat.regenerate without bypassing the FAQ", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    expect(buttonsNamed(actionsFor(A1) as HTMLElement, "Regenerate")).toEqual([]);
    const [regen] = buttonsNamed(actionsFor(A2) as HTMLElement, "Regenerate");
    expect(regen).toBeDefined();
    expect(buttonsNamed(document, "Regenerate").length).toBe(1);
    regen?.click();
    const f = p.t.last();
    expect(f).toMatchObject({ type: "chat.regenerate", message_id: A2, bypass_faq: false });
    expect(regen?.disabled).toBe(true);
    expect(sendButton().disabled).toBe(true);

    p.receive({ type: "chat.accepted", id: f["id"], conversation_id: CONV, user_message_id: Q2, assistant_message_id: A2 });
    expect(message(A2)?.dataset["status"]).toBe("streaming");
    expect(bodyText(A2)).toBe("");
    expect(actionsFor(A2)).toBeNull();
    p.receive({ type: "chat.delta", message_id: A2, seq: 1, text: "Two *days*." });
    p.receive(done(A2));
    expect(message(A2)?.querySelector("em")?.textContent).toBe("days");
    expect(buttonsNamed(actionsFor(A2) as HTMLElement, "Regenerate").length).toBe(1);
  });

  test("a refused regenerate leaves the answer as it was", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    buttonsNamed(document, "Regenerate")[0]?.click();
    p.receive({ type: "chat.error", id: p.t.last()["id"], message_id: A2, code: "busy", message: "Busy, try again", retry_after_s: null });
    expect(bodyText(A2)).toBe("About 3 days.");
    expect(buttonsNamed(document, "Regenerate")[0]?.disabled).toBe(false);
    expect(alertBox().textContent).toBe("Busy, try again");
  });

  test("a failed answer can be regenerated", () => {
    const p = open();
    input().value = "q";
    p.c.submit();
    p.receive({ type: "chat.accepted", id: p.t.last()["id"], conversation_id: CONV, user_message_id: "q", assistant_message_id: "a" });
    p.receive({ type: "chat.delta", message_id: "a", seq: 1, text: "partial" });
    p.receive({ type: "chat.error", id: null, message_id: "a", code: "engine", message: "The engine failed", retry_after_s: null });
    expect(message("a")?.dataset["status"]).toBe("failed");
    expect(bodyText("a")).toBe("partial");
    const [regen] = buttonsNamed(document, "Regenerate");
    expect(regen?.disabled).toBe(false);
    expect(buttonsNamed(document, "Good answer")).toEqual([]);
    regen?.click();
    expect(p.t.last()).toMatchObject({ type: "chat.regenerate", message_id: "a", bypass_faq: false });
  });
});

describe("suggested FAQ questions (Did you mean)", () => {
  const RESET = { entry_id: 3, question: "How do I reset my password?" };
  const CLOSE = { entry_id: 4, question: "How do I delete my account?" };
  const suggestionsFor = (id: string) => log().querySelector<HTMLElement>(`.suggested-questions[data-for="${id}"]`);
  const shown = (id: string) => {
    const row = suggestionsFor(id);
    return row !== null && !row.hidden;
  };

  function answered(p: Page, question: string, answerId: string, extra: Record<string, unknown>): void {
    input().value = question;
    p.c.submit();
    p.receive({ type: "chat.accepted", id: p.t.last("chat.send")["id"], conversation_id: CONV, user_message_id: `q-${answerId}`, assistant_message_id: answerId });
    p.receive({ type: "chat.delta", message_id: answerId, seq: 1, text: "A model answer." });
    p.receive(done(answerId, extra));
  }

  test("shown under a finished model answer, labelled, one button per entry after its actions", () => {
    const p = open();
    answered(p, "I want to close my account permanently", "a", { suggested_entries: [RESET, CLOSE] });
    const row = suggestionsFor("a") as HTMLElement;
    expect(row.getAttribute("role")).toBe("group");
    expect(row.getAttribute("aria-label")).toBe("Did you mean");
    expect(row.textContent).toContain("Did you mean:");
    const buttons = Array.from(row.querySelectorAll("button"));
    expect(buttons.map(accessibleName)).toEqual([RESET.question, CLOSE.question]);
    expect(buttons.every((b) => b.type === "button" && !b.disabled)).toBe(true);
    expect(row.previousElementSibling).toBe(actionsFor("a")); // after the answer's buttons
    expect(shown("a")).toBe(true);
  });

  test("no row without suggestions, and none while the answer streams", () => {
    const p = open();
    answered(p, "hi", "a", {});
    expect(suggestionsFor("a")).toBeNull();
    input().value = "next";
    p.c.submit();
    p.receive({ type: "chat.accepted", id: p.t.last("chat.send")["id"], conversation_id: CONV, user_message_id: "q2", assistant_message_id: "b" });
    expect(suggestionsFor("b")).toBeNull();
  });

  test("a click sends the question as the next message through the outbox, keeps the draft, and hides the row", () => {
    const p = open();
    answered(p, "I want to close my account permanently", "a", { suggested_entries: [RESET, CLOSE] });
    input().value = "half-typed draft";
    const [button] = buttonsNamed(suggestionsFor("a") as HTMLElement, CLOSE.question);
    button?.click();
    const send = p.t.last("chat.send");
    expect(send).toMatchObject({ conversation_id: CONV, text: CLOSE.question });
    expect(input().value).toBe("half-typed draft");
    expect(document.activeElement).toBe(input());
    expect(shown("a")).toBe(false); // busy: the question is on its way
    const pending = log().querySelector<HTMLElement>('.message[data-role="user"][data-status="pending"]');
    expect(pending?.textContent).toBe(CLOSE.question);
    // A reconnect before chat.accepted sends the same frame again (same id: never a second answer).
    p.c.onClose();
    p.c.onOpen();
    expect(p.t.sent.filter((f) => f["type"] === "chat.send" && f["id"] === send["id"]).length).toBe(2);

    p.receive({ type: "chat.accepted", id: send["id"], conversation_id: CONV, user_message_id: "q2", assistant_message_id: "b" });
    p.receive({ type: "chat.delta", message_id: "b", seq: 1, text: "Go to Settings > Account." });
    p.receive(done("b", { source: "faq", faq_entry_id: CLOSE.entry_id }));
    expect(message("b")?.dataset["source"]).toBe("faq");
    expect(shown("a")).toBe(false); // no longer the newest answer
    expect(input().value).toBe("half-typed draft");
  });

  test("keyboard: the suggestions are enabled buttons in the tab order", () => {
    const p = open();
    answered(p, "I want to close my account permanently", "a", { suggested_entries: [RESET] });
    const [button] = buttonsNamed(suggestionsFor("a") as HTMLElement, RESET.question);
    expect(button?.tabIndex).toBe(0);
    expect(button?.hidden).toBe(false);
    button?.focus();
    expect(document.activeElement).toBe(button);
  });

  test("after a reload the newest answer's suggestions from the history are shown, an older one's not", () => {
    const history = [
      HISTORY[0],
      { ...HISTORY[1], suggested_entries: [CLOSE] },
      HISTORY[2],
      { ...HISTORY[3], suggested_entries: [RESET, CLOSE] },
    ];
    const p = open({ history, conversationId: CONV });
    expect(shown(A1)).toBe(false);
    expect(shown(A2)).toBe(true);
    buttonsNamed(suggestionsFor(A2) as HTMLElement, RESET.question)[0]?.click();
    expect(p.t.last("chat.send")).toMatchObject({ conversation_id: CONV, text: RESET.question });
  });

  test("hidden while another answer is regenerated; a refused send brings them back", () => {
    const p = open({ history: [...HISTORY.slice(0, 3), { ...HISTORY[3], suggested_entries: [RESET] }], conversationId: CONV });
    buttonsNamed(suggestionsFor(A2) as HTMLElement, RESET.question)[0]?.click();
    expect(shown(A2)).toBe(false);
    p.receive({ type: "chat.error", id: p.t.last("chat.send")["id"], code: "busy", message: "Busy.", retry_after_s: 2 });
    expect(shown(A2)).toBe(true);
    buttonsNamed(actionsFor(A2) as HTMLElement, "Regenerate")[0]?.click();
    expect(shown(A2)).toBe(false);
    p.receive({ type: "chat.accepted", id: p.t.last()["id"], conversation_id: CONV, user_message_id: Q2, assistant_message_id: A2 });
    expect(suggestionsFor(A2)).toBeNull(); // the answer is made again: its own suggestions come with its end
  });

  test("a question is text: markup in a suggestion is shown as typed", () => {
    const p = open();
    answered(p, "x", "a", { suggested_entries: [{ entry_id: 1, question: '<img src=x onerror="alert(1)"> <b>hi</b>' }] });
    const button = suggestionsFor("a")?.querySelector("button") as HTMLButtonElement;
    expect(dangerousNodes(button)).toEqual([]);
    expect(button.children.length).toBe(0);
    expect(button.textContent).toBe('<img src=x onerror="alert(1)"> <b>hi</b>');
  });
});

describe("edit and resend", () => {
  function editButton(id: string): HTMLButtonElement {
    const [b] = buttonsNamed(actionsFor(id) as HTMLElement, "Edit");
    if (b === undefined) throw new Error(`no Edit under ${id}`);
    return b;
  }

  function editor(id: string): HTMLTextAreaElement {
    const ta = message(id)?.querySelector<HTMLTextAreaElement>("textarea");
    if (ta == null) throw new Error(`no editor in ${id}`);
    return ta;
  }

  test("every stored question has Edit; the editor is inline, labelled, with Save and Cancel", () => {
    open({ history: HISTORY, conversationId: CONV });
    expect(buttonsNamed(document, "Edit").length).toBe(2);
    editButton(Q1).click();
    const ta = editor(Q1);
    expect(ta.value).toBe("Do you ship to Norway?");
    expect(ta.getAttribute("aria-label")).toBe("Edit question");
    expect(document.activeElement).toBe(ta);
    expect(buttonsNamed(message(Q1) as HTMLElement, "Save").length).toBe(1);
    expect(buttonsNamed(message(Q1) as HTMLElement, "Cancel").length).toBe(1);
    // The composer's names stay unique while editing.
    expect(buttonsNamed(document, "Send")).toEqual([sendButton()]);
    expect(Array.from(document.querySelectorAll("textarea")).filter((t) => /message/i.test(t.getAttribute("aria-label") ?? ""))).toEqual([]);

    // Escape cancels, focus goes back to Edit, nothing is sent.
    press(ta, "Escape");
    expect(message(Q1)?.querySelector("textarea")).toBeNull();
    expect(document.activeElement).toBe(editButton(Q1));
    expect(bodyText(Q1)).toBe("Do you ship to Norway?");
  });

  test("saving sends chat.edit; on chat.accepted later messages go and the answer streams again", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    editButton(Q1).click();
    const ta = editor(Q1);
    ta.value = "Do you ship to Sweden?";
    p.clock.now = 2000;
    press(ta, "Enter");
    const f = p.t.last();
    expect(f).toEqual({ type: "chat.edit", id: f["id"], message_id: Q1, text: "Do you ship to Sweden?" });
    expect(typeof f["id"]).toBe("string");
    // Pending: the new text, no editor, everything else waits.
    expect(message(Q1)?.dataset["status"]).toBe("pending");
    expect(bodyText(Q1)).toBe("Do you ship to Sweden?");
    expect(message(Q1)?.querySelector("textarea")).toBeNull();
    expect(sendButton().disabled).toBe(true);
    expect(buttonsNamed(document, "Edit").every((b) => b.disabled)).toBe(true);
    expect(messageIds()).toEqual([`user:${Q1}`, `assistant:${A1}`, `user:${Q2}`, `assistant:${A2}`]);

    p.clock.now = 2020;
    p.receive({ type: "chat.accepted", id: f["id"], conversation_id: CONV, user_message_id: Q1, assistant_message_id: A1 });
    expect(messageIds()).toEqual([`user:${Q1}`, `assistant:${A1}`]);
    expect(log().querySelector(`[data-for="${Q2}"], [data-for="${A2}"]`)).toBeNull();
    expect(message(Q1)?.dataset["status"]).toBe("complete");
    expect(message(A1)?.dataset["status"]).toBe("streaming");
    expect(bodyText(A1)).toBe("");
    expect(stopButton().disabled).toBe(false);

    p.clock.now = 2050;
    p.receive({ type: "chat.delta", message_id: A1, seq: 1, text: "Yes, to **Sweden** too." });
    p.receive(done(A1));
    expect(message(A1)?.querySelector("strong")?.textContent).toBe("Sweden");
    expect(log().querySelector<HTMLElement>(`.message-meta[data-for="${A1}"]`)?.dataset["ttftMs"]).toBe("50");
    // A1 is now the newest answer: it has Regenerate; the questions can be edited again.
    expect(buttonsNamed(actionsFor(A1) as HTMLElement, "Regenerate").length).toBe(1);
    expect(editButton(Q1).disabled).toBe(false);
  });

  test("editing the last question keeps everything before it", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    editButton(Q2).click();
    editor(Q2).value = "How long to Sweden?";
    (message(Q2)?.querySelector("form") as HTMLFormElement).requestSubmit();
    const f = p.t.last("chat.edit");
    p.receive({ type: "chat.accepted", id: f["id"], conversation_id: CONV, user_message_id: Q2, assistant_message_id: A2 });
    expect(messageIds()).toEqual([`user:${Q1}`, `assistant:${A1}`, `user:${Q2}`, `assistant:${A2}`]);
    expect(bodyText(A1)).toBe("Yes, we do.");
    expect(message(A2)?.dataset["status"]).toBe("streaming");
  });

  test("a question without an answer gets a new answer element right under it", () => {
    const history = [
      { id: Q1, role: "user", content: "first", status: "complete" },
      { id: A1, role: "assistant", content: "one", status: "complete" },
      { id: Q2, role: "user", content: "orphan", status: "complete" },
    ];
    const p = open({ history, conversationId: CONV });
    editButton(Q2).click();
    editor(Q2).value = "second";
    press(editor(Q2), "Enter");
    p.receive({ type: "chat.accepted", id: p.t.last()["id"], conversation_id: CONV, user_message_id: Q2, assistant_message_id: A2 });
    expect(messageIds()).toEqual([`user:${Q1}`, `assistant:${A1}`, `user:${Q2}`, `assistant:${A2}`]);
    const order = Array.from(log().children);
    expect(order.indexOf(message(A2) as HTMLElement)).toBeGreaterThan(order.indexOf(actionsFor(Q2) as HTMLElement));
  });

  test("a refused edit changes nothing: the old text is back and the editor reopens with the new one", () => {
    vi.useFakeTimers();
    const p = open({ history: HISTORY, conversationId: CONV });
    editButton(Q1).click();
    editor(Q1).value = "Edited";
    press(editor(Q1), "Enter");
    p.receive({ type: "chat.error", id: p.t.last()["id"], message_id: Q1, code: "busy", message: "An answer is still streaming; stop it first.", retry_after_s: 3 });
    expect(messageIds()).toEqual([`user:${Q1}`, `assistant:${A1}`, `user:${Q2}`, `assistant:${A2}`]);
    expect(bodyText(Q1)).toBe("Do you ship to Norway?");
    expect(message(Q1)?.dataset["status"]).toBe("complete");
    expect(editor(Q1).value).toBe("Edited");
    expect(alertBox().hidden).toBe(false);
    expect(alertBox().textContent).toBe("An answer is still streaming; stop it first. (3 s)");
    expect(sendButton().disabled).toBe(false);
  });

  test("empty text is not sent; offline shows why", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    editButton(Q1).click();
    editor(Q1).value = "   ";
    press(editor(Q1), "Enter");
    expect(p.t.sent.filter((f) => f["type"] === "chat.edit")).toEqual([]);
    expect(alertBox().textContent).toBe("The question cannot be empty.");
    p.t.connected = false;
    editor(Q1).value = "new";
    press(editor(Q1), "Enter");
    expect(alertBox().textContent).toBe("Not connected: could not send the edited question.");
    expect(editor(Q1).value).toBe("new");
  });

  test("Edit is disabled while an answer streams", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    input().value = "more";
    p.c.submit();
    expect(buttonsNamed(document, "Edit").every((b) => b.disabled)).toBe(true);
    p.receive({ type: "chat.accepted", id: p.t.last()["id"], conversation_id: CONV, user_message_id: "q3", assistant_message_id: "a3" });
    expect(buttonsNamed(document, "Edit").length).toBe(3);
    expect(buttonsNamed(document, "Edit").every((b) => b.disabled)).toBe(true);
    p.c.startEdit(Q1);
    expect(message(Q1)?.querySelector("textarea")).toBeNull();
    p.receive(done("a3"));
    expect(buttonsNamed(document, "Edit").every((b) => !b.disabled)).toBe(true);
  });

  test("a connection lost before chat.accepted of an edit reloads the page on reconnect", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    editButton(Q1).click();
    editor(Q1).value = "Edited";
    press(editor(Q1), "Enter");
    p.c.onClose();
    expect(p.reloads).toBe(0);
    p.c.onOpen();
    expect(p.reloads).toBe(1);
    expect(p.t.sent.filter((f) => f["type"] === "chat.edit").length).toBe(1); // never sent twice
  });
});

describe("busy countdown", () => {
  test("the retry-after counts down in a timer the alert announces once", () => {
    vi.useFakeTimers();
    const p = open();
    input().value = "hello";
    p.c.submit();
    p.receive({ type: "chat.error", id: p.t.last()["id"], message_id: null, code: "busy", message: "The assistant is busy.", retry_after_s: 2.5 });
    const alert = alertBox();
    expect(alert.getAttribute("role")).toBe("alert");
    expect(alert.hidden).toBe(false);
    expect(alert.textContent).toBe("The assistant is busy. (3 s)");
    const timer = alert.querySelector('[role="timer"]');
    expect(timer?.textContent).toBe("(3 s)");
    expect(timer?.getAttribute("aria-live")).toBe("off");
    expect(alert.dataset["retryIn"]).toBe("3");
    expect(input().value).toBe("hello"); // the text is kept
    vi.advanceTimersByTime(1000);
    expect(alert.textContent).toBe("The assistant is busy. (2 s)");
    expect(alert.dataset["retryIn"]).toBe("2");
    vi.advanceTimersByTime(2000);
    expect(alert.hidden).toBe(true);
    expect(alert.dataset["retryIn"]).toBeUndefined();
  });
});

describe("reconnect", () => {
  test("a streaming answer resumes from the last seq shown", () => {
    const p = open();
    input().value = "q";
    p.c.submit();
    p.receive({ type: "chat.accepted", id: p.t.last()["id"], conversation_id: CONV, user_message_id: "q", assistant_message_id: "a" });
    p.receive({ type: "chat.delta", message_id: "a", seq: 1, text: "Hel" });
    p.receive({ type: "chat.delta", message_id: "a", seq: 2, text: "lo" });
    p.c.onClose();
    p.c.onOpen();
    expect(p.t.sent.find((f) => f["type"] === "chat.resume")).toMatchObject({ message_id: "a", last_seq: 2 });
    p.receive({ type: "chat.delta", message_id: "a", seq: 2, text: "lo" }); // repeated: ignored
    p.receive({ type: "chat.delta", message_id: "a", seq: 3, text: " there" });
    p.receive(done("a"));
    expect(bodyText("a")).toBe("Hello there");
  });

  test("a snapshot replaces the shown text", () => {
    const p = open();
    input().value = "q";
    p.c.submit();
    p.receive({ type: "chat.accepted", id: p.t.last()["id"], conversation_id: CONV, user_message_id: "q", assistant_message_id: "a" });
    p.receive({ type: "chat.delta", message_id: "a", seq: 1, text: "Hel" });
    p.frames.runFrame();
    p.receive({ type: "chat.snapshot", message_id: "a", content: "Hello, **all** of it" });
    p.receive(done("a"));
    expect(message("a")?.querySelector(".message-body")?.innerHTML).toBe("<p>Hello, <strong>all</strong> of it</p>");
  });
});

describe("talking to a person", () => {
  const handoffButton = () => document.getElementById("handoff-action") as HTMLButtonElement;
  const notice = () => document.getElementById("handoff-notice")?.textContent ?? "";
  const AGENT_MSG = "d1000000-0000-4000-8000-000000000000";
  const HELD_MSG = "e1000000-0000-4000-8000-000000000000";
  const state = (s: string, text: string, extra: Record<string, unknown> = {}) => ({
    type: "chat.handoff_state",
    conversation_id: CONV,
    state: s,
    notice: text,
    position: null,
    agent: null,
    ...extra,
  });
  const human = (id: string | null, role: string, content: string, messageId: string, sender: string | null = null) => ({
    type: "chat.human",
    id,
    conversation_id: CONV,
    message: { id: messageId, role, content, sender, created_at: "2026-12-07T12:00:00+00:00" },
  });

  test("a person can be asked for once the conversation exists", () => {
    const p = open();
    expect(handoffButton().hidden).toBe(true);
    input().value = "q";
    p.c.submit();
    p.receive({ type: "chat.accepted", id: p.t.last()["id"], conversation_id: CONV, user_message_id: "q", assistant_message_id: "a" });
    expect(handoffButton().hidden).toBe(false);
    expect(handoffButton().textContent).toBe("Talk to a person");
    handoffButton().click();
    expect(p.t.last()).toMatchObject({ type: "chat.handoff", conversation_id: CONV, action: "request" });
  });

  test("waiting, the customer is told their place and may stop waiting", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    expect(p.t.last()).toMatchObject({ type: "chat.sync", conversation_id: CONV, after_message_id: A2 });
    p.receive(state("waiting", "A person will join shortly. You are number 2 in line.", { position: 2 }));
    expect(notice()).toBe("A person will join shortly. You are number 2 in line.");
    expect(handoffButton().textContent).toBe("Stop waiting");
    handoffButton().click();
    expect(p.t.last()).toMatchObject({ type: "chat.handoff", action: "cancel" });
    p.receive(state("with_agent", "Dana joined the conversation.", { agent: "Dana" }));
    expect(handoffButton().hidden).toBe(true);
  });

  test("a send while a person holds it is stored for them, and their reply shows once, named", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    p.receive(state("with_agent", "Dana joined the conversation.", { agent: "Dana" }));
    input().value = "it arrived broken";
    p.c.submit();
    const sent = p.t.last("chat.send");
    p.receive(human(sent["id"] as string, "user", "it arrived broken", HELD_MSG));
    expect(message(HELD_MSG)?.dataset["status"]).toBe("complete");
    expect(input().value).toBe("");
    expect(sendButton().disabled).toBe(false); // nothing streams: the next message can go
    p.receive(human(null, "agent", "Sorry! A new one is on its way.", AGENT_MSG, "Dana"));
    p.receive(human(null, "agent", "Sorry! A new one is on its way.", AGENT_MSG, "Dana")); // again (a sync)
    expect(messageIds().slice(-2)).toEqual([`user:${HELD_MSG}`, `agent:${AGENT_MSG}`]);
    expect(message(AGENT_MSG)?.dataset["sender"]).toBe("Dana");
    expect(bodyText(AGENT_MSG)).toBe("Sorry! A new one is on its way.");
    // a person's words are text, never markup
    const tricky = "f1000000-0000-4000-8000-000000000000";
    p.receive(human(null, "agent", '<img src=x onerror="alert(1)">', tricky, "Dana"));
    const body = message(tricky)?.querySelector(".message-body") as HTMLElement;
    expect(body.textContent).toBe('<img src=x onerror="alert(1)">');
    expect(dangerousNodes(body)).toEqual([]);
  });

  test("while a person is asked for or holds it, nothing on the page wakes the assistant", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    const regenerate = () => buttonsNamed(actionsFor(A2) as HTMLElement, "Regenerate");
    const edit = () => message(Q2)?.querySelector<HTMLButtonElement>("button.message-edit") ?? buttonsNamed(message(Q2)?.parentElement as HTMLElement, "Edit")[0];
    expect(regenerate()).toHaveLength(1);
    expect(edit()?.disabled).toBe(false);
    p.receive(state("waiting", "A person will join shortly. You are next in line.", { position: 1 }));
    expect(regenerate()).toHaveLength(0);
    expect(edit()?.disabled).toBe(true);
    p.receive(state("with_agent", "Dana joined the conversation.", { agent: "Dana" }));
    expect(regenerate()).toHaveLength(0);
    p.receive(state("bot", "Back with the assistant."));
    expect(regenerate()).toHaveLength(1);
    expect(edit()?.disabled).toBe(false);
  });

  test("another conversation's news is not shown here", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    p.receive({ ...state("waiting", "A person will join shortly."), conversation_id: Q1 });
    p.receive({ ...human(null, "agent", "hi", AGENT_MSG, "Dana"), conversation_id: Q1 });
    expect(notice()).toBe("");
    expect(message(AGENT_MSG)).toBeNull();
  });

  test("each side sees the other typing", () => {
    vi.useFakeTimers();
    try {
      const p = open({ history: HISTORY, conversationId: CONV });
      input().value = "a";
      input().dispatchEvent(new Event("input"));
      expect(p.t.sent.filter((f) => f["type"] === "chat.typing")).toEqual([]); // the assistant answers: nobody to tell
      p.receive(state("with_agent", "Dana joined the conversation.", { agent: "Dana" }));
      for (const text of ["ab", "abc"]) {
        input().value = text;
        input().dispatchEvent(new Event("input"));
      }
      expect(p.t.sent.filter((f) => f["type"] === "chat.typing")).toHaveLength(1);
      p.receive({ type: "chat.agent_typing", conversation_id: CONV, agent: "Dana" });
      expect(notice()).toBe("Dana is typing…");
      p.receive(human(null, "agent", "Here you go", AGENT_MSG, "Dana"));
      expect(notice()).toBe("Dana joined the conversation.");
      p.receive({ type: "chat.agent_typing", conversation_id: CONV, agent: "Dana" });
      vi.advanceTimersByTime(4100);
      expect(notice()).toBe("Dana joined the conversation.");
    } finally {
      vi.useRealTimers();
    }
  });

  test("with nobody of the team online, the customer may leave an email address", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    const form = document.getElementById("handoff-contact") as HTMLFormElement;
    const email = document.getElementById("handoff-email") as HTMLInputElement;
    expect(form.hidden).toBe(true);
    p.receive(state("waiting", "Nobody from the team is online right now.", { nobody_online: true }));
    expect(form.hidden).toBe(false);
    email.value = " a@b.example ";
    form.requestSubmit();
    expect(p.t.last()).toMatchObject({ type: "chat.handoff", action: "contact", email: "a@b.example" });
    p.receive(state("waiting", "Thank you! The team will write to you at a@b.example.", { nobody_online: true, contact_email: "a@b.example" }));
    expect(form.hidden).toBe(true);
    expect(notice()).toBe("Thank you! The team will write to you at a@b.example.");
  });

  test("after a thumbs-down the page offers a person, and says the ask came from the offer", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    p.c.rate(A2, "down");
    p.receive({ type: "chat.feedback_recorded", id: p.t.last("chat.feedback")["id"], message_id: A2, rating: "down" });
    expect(notice()).toBe("Sorry that did not help. A person of the team can take over.");
    expect(document.getElementById("chat-handoff")?.dataset["offer"]).toBe("1");
    handoffButton().click();
    expect(p.t.last()).toMatchObject({ type: "chat.handoff", action: "request", reason: "offered" });
    p.receive(state("waiting", "A person will join shortly. You are next in line.", { position: 1 }));
    expect(document.getElementById("chat-handoff")?.dataset["offer"]).toBeUndefined();
  });

  test("an answer that cannot help offers a person; one that helps does not", () => {
    const p = open({ history: HISTORY, conversationId: CONV });
    const ask = (id: string, offer: boolean) => {
      input().value = "where is my parcel?";
      p.c.submit();
      p.receive({ type: "chat.accepted", id: p.t.last()["id"], conversation_id: CONV, user_message_id: `q${id}`, assistant_message_id: id });
      p.receive({ type: "chat.delta", message_id: id, seq: 1, text: offer ? "I can't see your order." : "It ships today." });
      p.receive(done(id, { offer_person: offer }));
    };
    ask("a-helps", false);
    expect(document.getElementById("chat-handoff")?.dataset["offer"]).toBeUndefined();
    ask("a-cannot", true);
    expect(notice()).toBe("A person of the team can help with this.");
    handoffButton().click();
    expect(p.t.last()).toMatchObject({ type: "chat.handoff", action: "request", reason: "offered" });
  });
});

