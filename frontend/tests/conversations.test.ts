// @vitest-environment jsdom
import { describe, expect, test } from "vitest";

import { ConversationList, conversationPath, MAX_CONVERSATIONS, parseConversations, titleFromText, withOnTop, type ConversationItem, type FetchJson } from "../src/conversations.ts";

const A = "11111111-1111-4111-8111-111111111111";
const B = "22222222-2222-4222-8222-222222222222";
const C = "33333333-3333-4333-8333-333333333333";

function item(id: string, title: string, updated_at = "2026-11-29T10:00:00+00:00"): ConversationItem {
  return { id, title, updated_at };
}

describe("titles like the server's", () => {
  test("whitespace is collapsed", () => {
    expect(titleFromText("  Do you\n\tship   to Norway? ")).toBe("Do you ship to Norway?");
    expect(titleFromText("")).toBe("");
    expect(titleFromText(" \n ")).toBe("");
  });

  test("60 characters fit; longer ones are cut to 59 and end with …", () => {
    const sixty = "x".repeat(60);
    expect(titleFromText(sixty)).toBe(sixty);
    expect(titleFromText(sixty + "y")).toBe("x".repeat(59) + "…");
    expect(Array.from(titleFromText("word ".repeat(30))).length).toBe(60); // 59 + "…"
  });

  test("a cut right after a space drops the space before the …", () => {
    // Python: line[:59].rstrip() + "…"
    const text = "a".repeat(58) + " bcdef";
    expect(titleFromText(text)).toBe("a".repeat(58) + "…");
  });

  test("characters are counted as code points, like Python", () => {
    const emoji = "😀".repeat(61);
    expect(titleFromText(emoji)).toBe("😀".repeat(59) + "…");
    expect(titleFromText("😀".repeat(60))).toBe("😀".repeat(60));
  });

  test("whitespace is what Python's str.split() splits on", () => {
    expect(titleFromText("a\u3000b\u00a0c\x1cd\x85e\u2028f")).toBe("a b c d e f");
    // Not whitespace for Python: kept.
    expect(titleFromText("a\ufeffb\u200bc")).toBe("a\ufeffb\u200bc");
  });
});

describe("parsing the list", () => {
  test("the page block (a list) and the API answer ({conversations})", () => {
    const items = [item(A, "First"), item(B, "Second")];
    expect(parseConversations(items)).toEqual(items);
    expect(parseConversations({ conversations: items })).toEqual(items);
  });

  test("malformed items are skipped, duplicates dropped, at most 50 kept", () => {
    expect(parseConversations([null, 1, "x", { title: "no id" }, { id: 5 }, { id: "" }, { id: A }, { id: A, title: "dup" }])).toEqual([{ id: A, title: "", updated_at: "" }]);
    expect(parseConversations(undefined)).toEqual([]);
    expect(parseConversations({ conversations: "nope" })).toEqual([]);
    const many = Array.from({ length: 70 }, (_, i) => item(`id-${i}`, `t${i}`));
    expect(parseConversations(many).length).toBe(MAX_CONVERSATIONS);
  });

  test("withOnTop moves or adds an item to the top", () => {
    const items = [item(A, "a"), item(B, "b"), item(C, "c")];
    expect(withOnTop(items, item(C, "c")).map((c) => c.id)).toEqual([C, A, B]);
    expect(withOnTop(items, item("d", "d")).map((c) => c.id)).toEqual(["d", A, B, C]);
  });
});

function nav(): HTMLElement {
  document.body.innerHTML = `<nav aria-label="Conversations"><h2>Conversations</h2><ol class="conversation-list"></ol><p class="conversation-list-empty" hidden>No conversations yet.</p></nav>`;
  return document.querySelector("nav") as HTMLElement;
}

function links(el: HTMLElement): [string | null, string | null, string | null][] {
  return Array.from(el.querySelectorAll("a"), (a) => [a.getAttribute("href"), a.textContent, a.getAttribute("aria-current")]);
}

describe("the conversation nav", () => {
  test("links to /c/<id>/, newest first, the open one aria-current=page", () => {
    const el = nav();
    const list = new ConversationList(el, B);
    list.show([item(A, "Shipping to Norway"), item(B, "Refund <b>please</b>"), item(C, "")]);
    expect(links(el)).toEqual([
      [`/c/${A}/`, "Shipping to Norway", null],
      [`/c/${B}/`, "Refund <b>please</b>", "page"],
      [`/c/${C}/`, "Untitled conversation", null],
    ]);
    expect(el.querySelector("b")).toBeNull(); // titles are text
    expect((el.querySelector(".conversation-list-empty") as HTMLElement).hidden).toBe(true);
    expect(conversationPath("a/b")).toBe("/c/a%2Fb/");
  });

  test("an empty list says so", () => {
    const el = nav();
    new ConversationList(el, null).show([]);
    expect((el.querySelector(".conversation-list-empty") as HTMLElement).hidden).toBe(false);
    expect((el.querySelector("ol") as HTMLElement).hidden).toBe(true);
  });

  test("a new conversation is added on top, titled from its first question, and marked current", () => {
    const el = nav();
    const list = new ConversationList(el, null);
    list.show([item(A, "Older")]);
    list.touch(B, "  How long does\n delivery to Tromsø take when I order " + "x".repeat(40));
    expect(links(el)).toEqual([
      [`/c/${B}/`, "How long does delivery to Tromsø take when I order " + "x".repeat(8) + "…", "page"],
      [`/c/${A}/`, "Older", null],
    ]);
    expect(list.current).toBe(B);
  });

  test("a question in an existing conversation moves it to the top and keeps its title", () => {
    const el = nav();
    const list = new ConversationList(el, B);
    list.show([item(A, "a"), item(B, "b"), item(C, "c")]);
    const rowB = el.querySelector(`li[data-conversation-id="${B}"]`);
    list.touch(B, null);
    expect(links(el).map((l) => l[1])).toEqual(["b", "a", "c"]);
    // The same row element, moved.
    expect(el.querySelector(`li[data-conversation-id="${B}"]`)).toBe(rowB);
  });

  test("at most 50 entries", () => {
    const el = nav();
    const list = new ConversationList(el, null);
    list.show(Array.from({ length: 50 }, (_, i) => item(`id-${i}`, `t${i}`)));
    list.touch("new", "hello");
    expect(el.querySelectorAll("li").length).toBe(50);
    expect(el.querySelector("li a")?.textContent).toBe("hello");
    expect(el.querySelector(`li[data-conversation-id="id-49"]`)).toBeNull();
  });

  test("refresh loads GET /api/conversations/; a failure leaves the list alone", async () => {
    const el = nav();
    const list = new ConversationList(el, A);
    list.show([item(A, "mine")]);
    const calls: [string, unknown][] = [];
    const ok: FetchJson = async (url, init) => {
      calls.push([url, init]);
      return { ok: true, status: 200, json: async () => ({ conversations: [item(C, "from another tab"), item(A, "mine")] }) };
    };
    expect(await list.refresh(ok)).toBe(true);
    expect(calls).toEqual([["/api/conversations/", { headers: { Accept: "application/json" }, credentials: "same-origin", cache: "no-store" }]]);
    expect(links(el).map((l) => l[1])).toEqual(["from another tab", "mine"]);

    const unauthorized: FetchJson = async () => ({ ok: false, status: 401, json: async () => ({ error: { code: "unauthenticated" } }) });
    expect(await list.refresh(unauthorized)).toBe(false);
    const offline: FetchJson = async () => {
      throw new TypeError("Failed to fetch");
    };
    expect(await list.refresh(offline)).toBe(false);
    const garbage: FetchJson = async () => ({ ok: true, status: 200, json: async () => ["not", "the", "shape"] });
    expect(await list.refresh(garbage)).toBe(false);
    expect(links(el).map((l) => l[1])).toEqual(["from another tab", "mine"]);
  });

  test("the open conversation stays listed when a refresh does not have it yet", async () => {
    const el = nav();
    const list = new ConversationList(el, null);
    list.touch(A, "just started");
    await list.refresh(async () => ({ ok: true, status: 200, json: async () => ({ conversations: [item(B, "other")] }) }));
    expect(links(el)).toEqual([
      [`/c/${A}/`, "just started", "page"],
      [`/c/${B}/`, "other", null],
    ]);
  });
});
