// The conversation list in the sidebar: `nav[aria-label="Conversations"]`, one link per
// conversation to `/c/<id>/`, newest first, the open one marked `aria-current="page"`.
// Filled from the page's `conversations` json_script block and refreshed from
// `GET /api/conversations/` (docs/protocol.md, "Conversation list").

export interface ConversationItem {
  id: string;
  title: string;
  updated_at: string;
}

/** The server keeps the newest 50; so does the list. */
export const MAX_CONVERSATIONS = 50;
/** A title is the first question cut at this many characters (chatapp/conversations/services.py). */
export const TITLE_CHARS = 60;
export const UNTITLED = "Untitled conversation";
export const CONVERSATIONS_URL = "/api/conversations/";

// Python's str.split() whitespace (str.isspace), which the server's title rule uses.
const PY_WHITESPACE = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/gu;
const PY_TRAILING = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/u;

/**
 * The title the server gives a conversation from its first question: whitespace collapsed,
 * at most 60 characters (code points), cut ones ending with "…". Same as `_title_from`.
 */
export function titleFromText(text: string): string {
  const line = text.split(PY_WHITESPACE).filter((w) => w !== "").join(" ");
  const chars = Array.from(line);
  if (chars.length <= TITLE_CHARS) return line;
  return chars.slice(0, TITLE_CHARS - 1).join("").replace(PY_TRAILING, "") + "…";
}

/** `/c/<id>/` */
export function conversationPath(id: string): string {
  return `/c/${encodeURIComponent(id)}/`;
}

/** Validate the page's block (a list) or the API's answer (`{"conversations": [...]}`); skips malformed items. */
export function parseConversations(data: unknown): ConversationItem[] {
  const list = Array.isArray(data) ? data : typeof data === "object" && data !== null && Array.isArray((data as Record<string, unknown>)["conversations"]) ? ((data as Record<string, unknown>)["conversations"] as unknown[]) : [];
  const out: ConversationItem[] = [];
  const seen = new Set<string>();
  for (const item of list as unknown[]) {
    if (typeof item !== "object" || item === null) continue;
    const o = item as Record<string, unknown>;
    const id = o["id"];
    if (typeof id !== "string" || id === "" || seen.has(id)) continue;
    seen.add(id);
    out.push({
      id,
      title: typeof o["title"] === "string" ? o["title"] : "",
      updated_at: typeof o["updated_at"] === "string" ? o["updated_at"] : "",
    });
  }
  return out.slice(0, MAX_CONVERSATIONS);
}

/** Move (or add) `item` to the top; keeps at most MAX_CONVERSATIONS. Pure. */
export function withOnTop(items: readonly ConversationItem[], item: ConversationItem): ConversationItem[] {
  return [item, ...items.filter((c) => c.id !== item.id)].slice(0, MAX_CONVERSATIONS);
}

/** The part of `fetch` the list uses. */
export type FetchJson = (url: string, init: { headers: Record<string, string>; credentials: "same-origin"; cache: "no-store" }) => Promise<{ ok: boolean; status: number; json(): Promise<unknown> }>;

export class ConversationList {
  private items: ConversationItem[] = [];
  private readonly list: HTMLElement;
  private readonly empty: HTMLElement;

  /**
   * @param nav the `<nav aria-label="Conversations">`; its `ol` (created if missing) holds the links
   * @param currentId the open conversation (null: a new chat)
   */
  constructor(
    readonly nav: HTMLElement,
    private currentId: string | null,
  ) {
    const doc = nav.ownerDocument;
    let list = nav.querySelector<HTMLElement>("ol.conversation-list");
    if (list === null) {
      list = doc.createElement("ol");
      list.className = "conversation-list";
      nav.appendChild(list);
    }
    this.list = list;
    let empty = nav.querySelector<HTMLElement>(".conversation-list-empty");
    if (empty === null) {
      empty = doc.createElement("p");
      empty.className = "conversation-list-empty";
      empty.textContent = "No conversations yet.";
      nav.appendChild(empty);
    }
    this.empty = empty;
  }

  get conversations(): readonly ConversationItem[] {
    return this.items;
  }

  get current(): string | null {
    return this.currentId;
  }

  /** Show `items` (newest first). The open conversation stays listed even if `items` lacks it. */
  show(items: readonly ConversationItem[]): void {
    let next = items.slice(0, MAX_CONVERSATIONS);
    const cur = this.currentId === null ? undefined : this.items.find((c) => c.id === this.currentId);
    if (cur !== undefined && !next.some((c) => c.id === cur.id)) next = withOnTop(next, cur);
    this.items = next;
    this.render();
  }

  /**
   * The open conversation got a new question (a send or an edit): it moves to the top.
   * A new one (the first `chat.accepted`) is added with the title the server gives it.
   */
  touch(id: string, firstQuestion: string | null, now: Date = new Date()): void {
    const existing = this.items.find((c) => c.id === id);
    const title = existing?.title ?? titleFromText(firstQuestion ?? "");
    this.currentId = id;
    this.items = withOnTop(this.items, { id, title, updated_at: now.toISOString() });
    this.render();
  }

  /** Reload from `GET /api/conversations/`; false when it failed (the list stays as it is). */
  async refresh(fetchJson: FetchJson): Promise<boolean> {
    try {
      const res = await fetchJson(CONVERSATIONS_URL, { headers: { Accept: "application/json" }, credentials: "same-origin", cache: "no-store" });
      if (!res.ok) return false;
      const data = await res.json();
      if (typeof data !== "object" || data === null || !Array.isArray((data as Record<string, unknown>)["conversations"])) return false;
      this.show(parseConversations(data));
      return true;
    } catch {
      return false;
    }
  }

  private render(): void {
    const doc = this.nav.ownerDocument;
    // Keep the focused link focused across a re-render (same element, updated in place).
    const byId = new Map<string, HTMLLIElement>();
    for (const li of Array.from(this.list.children)) {
      const id = (li as HTMLElement).dataset["conversationId"];
      if (id !== undefined) byId.set(id, li as HTMLLIElement);
    }
    const rows = this.items.map((c) => {
      const li = byId.get(c.id) ?? doc.createElement("li");
      li.dataset["conversationId"] = c.id;
      let a = li.querySelector("a");
      if (a === null) {
        a = doc.createElement("a");
        li.replaceChildren(a);
      }
      a.href = conversationPath(c.id);
      a.textContent = c.title !== "" ? c.title : UNTITLED;
      a.dataset["conversationId"] = c.id;
      if (c.id === this.currentId) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
      return li;
    });
    const same = rows.length === this.list.children.length && rows.every((li, i) => this.list.children[i] === li);
    if (!same) this.list.replaceChildren(...rows);
    this.empty.hidden = rows.length > 0;
    this.list.hidden = rows.length === 0;
  }
}
