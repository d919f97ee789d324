// @vitest-environment jsdom
// The agent console against its page markup (web/agent_console.html) with a fake socket.
import { beforeEach, describe, expect, test, vi } from "vitest";

import { AgentConsole, consoleElements, waitedText } from "../src/console.ts";
import { dangerousNodes, pageContentHtml } from "./helpers.ts";

const CONV = "c0000000-0000-4000-8000-000000000000";
const OTHER = "c1000000-0000-4000-8000-000000000000";
const M1 = "m1000000-0000-4000-8000-000000000000";
const M2 = "m2000000-0000-4000-8000-000000000000";

function item(conversation: string, extra: Record<string, unknown> = {}) {
  return {
    handoff_id: conversation === CONV ? 7 : 8,
    conversation_id: conversation,
    state: "waiting",
    waited_s: 95,
    site: "Shop",
    customer: "Website visitor",
    first_question: "my parcel is broken",
    last_message: "hello?",
    agent: null,
    mine: false,
    contact_email: null,
    reason: "asked",
    near_entries: [],
    ...extra,
  };
}

function message(id: string, role: string, content: string, sender: string | null = null) {
  return { id, role, content, sender, created_at: "2026-12-07T12:00:00+00:00" };
}

let sent: Record<string, unknown>[];
let desk: AgentConsole;
const receive = (f: Record<string, unknown>) => desk.onMessage(JSON.stringify(f));
const el = () => consoleElements(document);
const last = (type: string) => sent.filter((f) => f["type"] === type).at(-1) as Record<string, unknown>;

beforeEach(() => {
  document.body.innerHTML = pageContentHtml("web/agent_console.html");
  sent = [];
  desk = new AgentConsole(el());
  desk.attach((frame) => {
    sent.push(frame as unknown as Record<string, unknown>);
    return true;
  });
});

describe("the queue", () => {
  test("lists who waits, how long and what they asked, as text", () => {
    receive({ type: "agent.queue", items: [item(CONV, { first_question: "<b>hi</b>" }), item(OTHER, { state: "with_agent", agent: "Eli", site: null, customer: "alice" })] });
    const rows = Array.from(el().queue.querySelectorAll("li"));
    expect(rows.map((r) => r.querySelector("button")?.textContent)).toEqual(["Website visitor, Shop (waiting 1 min)", "alice (with Eli)"]);
    expect(rows[0]?.querySelector(".console-question")?.textContent).toBe("<b>hi</b>");
    expect(dangerousNodes(rows[0] as HTMLElement).filter((n) => n !== "<button>")).toEqual([]);
    expect(el().empty.hidden).toBe(true);
    receive({ type: "agent.queue", items: [] });
    expect(el().empty.hidden).toBe(false);
  });

  test("says why each customer asked and the FAQ entries their questions came close to", () => {
    receive({
      type: "agent.queue",
      items: [
        item(CONV, { reason: "typed", near_entries: ["How do I reset my password?", "Where is my parcel?"] }),
        item(OTHER, { reason: "offered" }),
      ],
    });
    const rows = Array.from(el().queue.querySelectorAll("li"));
    expect(rows.map((r) => r.querySelector("button")?.textContent)).toEqual([
      "Website visitor, Shop (waiting 1 min, asked in words)",
      "Website visitor, Shop (waiting 1 min, after the assistant offered)",
    ]);
    expect(rows[0]?.querySelector(".console-near")?.textContent).toBe("Close to the FAQ: “How do I reset my password?”, “Where is my parcel?”");
    expect(rows[1]?.querySelector(".console-near")).toBeNull();
  });

  test("taking a waiting customer claims and opens the conversation", () => {
    receive({ type: "agent.queue", items: [item(CONV)] });
    el().queue.querySelector("button")?.click();
    expect(last("agent.claim")).toMatchObject({ handoff_id: 7 });
    expect(last("agent.open")).toMatchObject({ conversation_id: CONV, after_message_id: null });
  });

  test("waited times read at a glance", () => {
    expect([waitedText(4.9), waitedText(61), waitedText(3725)]).toEqual(["4 s", "1 min", "1 h 2 min"]);
  });
});

describe("the conversation", () => {
  function held() {
    receive({ type: "agent.queue", items: [item(CONV)] });
    el().queue.querySelector("button")?.click();
    receive({ type: "agent.transcript", id: last("agent.open")["id"], conversation_id: CONV, handoff_id: 7, state: "with_agent", agent: "Dana", mine: true, messages: [message(M1, "user", "my parcel is broken")] });
  }

  test("the agent holding it replies; the reply leaves the box once stored, shown once", () => {
    held();
    expect(el().input.disabled).toBe(false);
    expect(el().title.textContent).toBe("Website visitor, Shop: with you");
    el().input.value = "Sorry! A new one is on its way.";
    el().form.requestSubmit();
    const reply = last("agent.send");
    expect(reply).toMatchObject({ handoff_id: 7, text: "Sorry! A new one is on its way." });
    expect(el().input.value).toBe("Sorry! A new one is on its way."); // not stored yet
    receive({ type: "agent.message", id: reply["id"], conversation_id: CONV, message: message(M2, "agent", "Sorry! A new one is on its way.", "Dana") });
    receive({ type: "agent.message", id: null, conversation_id: CONV, message: message(M2, "agent", "Sorry! A new one is on its way.", "Dana") });
    expect(el().input.value).toBe("");
    expect(Array.from(el().log.querySelectorAll(".message"), (m) => (m as HTMLElement).dataset["role"])).toEqual(["user", "agent"]);
  });

  test("another agent's conversation is read-only; a lost claim is said", () => {
    receive({ type: "agent.queue", items: [item(CONV)] });
    el().queue.querySelector("button")?.click();
    receive({ type: "agent.error", id: last("agent.claim")["id"], code: "busy", message: "Eli already took this conversation." });
    receive({ type: "agent.transcript", id: last("agent.open")["id"], conversation_id: CONV, handoff_id: 7, state: "with_agent", agent: "Eli", mine: false, messages: [] });
    expect(el().alert.textContent).toBe("Eli already took this conversation.");
    expect([el().input.disabled, el().release.disabled, el().close.disabled]).toEqual([true, true, true]);
  });

  test("the agent holding it may hand it to another agent", () => {
    held();
    el().transferTo.value = " eli ";
    el().transfer.click();
    expect(last("agent.transfer")).toMatchObject({ handoff_id: 7, to_agent: "eli" });
    expect(el().transferTo.value).toBe("");
    receive({ type: "agent.handoff", conversation_id: CONV, handoff_id: 7, state: "with_agent", agent: "Eli", mine: false });
    expect([el().transferTo.disabled, el().transfer.disabled, el().input.disabled]).toEqual([true, true, true]);
  });

  test("closing says how it was resolved", () => {
    held();
    el().resolution.value = " refund sent ";
    el().close.click();
    expect(last("agent.close")).toMatchObject({ handoff_id: 7, resolution: "refund sent" });
    expect(el().resolution.value).toBe("");
  });

  test("back to the assistant, and a reconnect catches up after the last message shown", () => {
    held();
    el().release.click();
    expect(last("agent.release")).toMatchObject({ handoff_id: 7 });
    receive({ type: "agent.handoff", conversation_id: CONV, handoff_id: 7, state: "bot", agent: null, mine: false });
    expect(el().input.disabled).toBe(true);
    desk.onOpen();
    expect(last("agent.open")).toMatchObject({ conversation_id: CONV, after_message_id: M1 });
  });

  test("the model's draft streams into the reply box until the agent writes", () => {
    held();
    const draft = (text: string, status = "streaming", id = "d1000000-0000-4000-8000-000000000000") =>
      receive({ type: "agent.draft", conversation_id: CONV, draft_id: id, text, status });
    draft("You said: ");
    draft("it arrived");
    expect(el().input.value).toBe("You said: it arrived");
    expect(el().input.dataset["draft"]).toBe("streaming");
    // the agent types: the draft stops where it is, their words stay
    el().input.value = "You said: it arrived, sorry";
    el().input.dispatchEvent(new Event("input"));
    expect(last("agent.draft_stop")).toMatchObject({ conversation_id: CONV });
    draft(" crushed"); // a piece already on its way is not added
    expect(el().input.value).toBe("You said: it arrived, sorry");
    // a later draft never replaces what the agent wrote
    draft("Another", "streaming", "d2000000-0000-4000-8000-000000000000");
    expect(el().input.value).toBe("You said: it arrived, sorry");
  });

  test("a finished draft waits in the box to be sent or changed", () => {
    held();
    receive({ type: "agent.draft", conversation_id: CONV, draft_id: "d1000000-0000-4000-8000-000000000000", text: "Sorry!", status: "streaming" });
    receive({ type: "agent.draft", conversation_id: CONV, draft_id: "d1000000-0000-4000-8000-000000000000", text: "", status: "done" });
    expect(el().input.dataset["draft"]).toBe("ready");
    el().form.requestSubmit();
    expect(last("agent.send")).toMatchObject({ text: "Sorry!" });
    expect(sent.filter((f) => f["type"] === "agent.draft_stop")).toEqual([]);
    expect(el().draftNote.hidden).toBe(true); // the model's words: no FAQ note
  });

  test("an approved FAQ answer as the draft says so until the agent makes it theirs", () => {
    held();
    const id = "d1000000-0000-4000-8000-000000000000";
    receive({ type: "agent.draft", conversation_id: CONV, draft_id: id, text: "We ship in 2 days.", status: "streaming" });
    receive({ type: "agent.draft", conversation_id: CONV, draft_id: id, text: "", status: "done", source: "faq" });
    expect(el().input.value).toBe("We ship in 2 days.");
    expect(el().draftNote.hidden).toBe(false);
    expect(el().draftNote.textContent).toContain("From the FAQ");
    el().input.value = "We ship in 2 days, yours tomorrow.";
    el().input.dispatchEvent(new Event("input"));
    expect(el().draftNote.hidden).toBe(true);
  });
});

describe("typing", () => {
  test("the customer typing shows for a while; the agent typing is told, at most every 2 s", () => {
    vi.useFakeTimers();
    try {
      receive({ type: "agent.queue", items: [item(CONV)] });
      el().queue.querySelector("button")?.click();
      receive({ type: "agent.transcript", id: last("agent.open")["id"], conversation_id: CONV, handoff_id: 7, state: "with_agent", agent: "Dana", mine: true, messages: [] });
      receive({ type: "agent.customer_typing", conversation_id: CONV });
      expect(el().typing.textContent).toBe("The customer is typing…");
      receive({ type: "agent.customer_typing", conversation_id: OTHER });
      vi.advanceTimersByTime(4100);
      expect(el().typing.textContent).toBe("");
      for (const text of ["H", "Hi", "Hi!"]) {
        el().input.value = text;
        el().input.dispatchEvent(new Event("input"));
      }
      expect(sent.filter((f) => f["type"] === "agent.typing")).toHaveLength(1);
      expect(last("agent.typing")).toMatchObject({ conversation_id: CONV });
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("notifications", () => {
  test("only after opting in, once for each customer who starts waiting", async () => {
    const shown: string[] = [];
    document.body.innerHTML = pageContentHtml("web/agent_console.html");
    const desk2 = new AgentConsole(el(), { permission: async () => true, show: (_title, body) => shown.push(body) });
    desk2.attach(() => true);
    const queue = (...items: Record<string, unknown>[]) => desk2.onMessage(JSON.stringify({ type: "agent.queue", items }));
    queue(item(CONV)); // already waiting when the console opened: not announced
    queue(item(CONV), item(OTHER, { first_question: "can I pay by card?" })); // not opted in yet
    el().notify.click();
    await Promise.resolve();
    await Promise.resolve();
    expect(el().notify.textContent).toBe("Notifications on");
    const third = "c2000000-0000-4000-8000-000000000000";
    queue(item(CONV), item(OTHER), { ...item(third), handoff_id: 9, first_question: "where is my refund?" });
    queue(item(CONV), item(OTHER), { ...item(third), handoff_id: 9, first_question: "where is my refund?" });
    expect(shown).toEqual(["where is my refund?"]);
  });
});

