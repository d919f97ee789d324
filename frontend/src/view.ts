// DOM helpers for one chat message. All model and user text goes in through text nodes
// (textContent / Text.appendData), never innerHTML.

export type Role = "user" | "assistant";
/** The documented statuses, plus "pending" for a user message the server has not accepted yet. */
export type ViewStatus = "pending" | "streaming" | "complete" | "stopped" | "failed";

export class MessageView {
  readonly element: HTMLElement;
  private text: Text | null = null;
  private meta: HTMLElement | null = null;

  constructor(doc: Document, role: Role, status: ViewStatus | (string & {}), messageId: string | null, content = "") {
    const el = doc.createElement("div");
    el.className = `message message-${role}`;
    el.dataset["role"] = role;
    if (messageId !== null) el.dataset["messageId"] = messageId;
    this.element = el;
    this.setStatus(status);
    if (content !== "") this.append(content);
  }

  get messageId(): string | null {
    return this.element.dataset["messageId"] ?? null;
  }

  set messageId(id: string | null) {
    if (id === null) delete this.element.dataset["messageId"];
    else this.element.dataset["messageId"] = id;
  }

  get status(): string {
    return this.element.dataset["status"] ?? "";
  }

  setStatus(status: ViewStatus | (string & {})): void {
    setMessageStatus(this.element, status);
  }

  /** Append text without touching what is already rendered (extends one text node). */
  append(text: string): void {
    if (text === "") return;
    if (this.text === null) {
      this.text = this.element.ownerDocument.createTextNode(text);
      this.element.appendChild(this.text);
    } else {
      this.text.appendData(text);
    }
  }

  /**
   * The small muted line under the message. It is a sibling of the message element (not a
   * child), so the message element's text is exactly the message content.
   */
  setMeta(line: string, data: Record<string, string> = {}): void {
    if (this.meta === null) {
      const meta = this.element.ownerDocument.createElement("p");
      meta.className = `message-meta message-meta-${this.element.dataset["role"] ?? ""}`;
      this.element.after(meta);
      this.meta = meta;
    }
    this.meta.textContent = line;
    for (const [k, v] of Object.entries(data)) this.meta.dataset[k] = v;
    if (this.messageId !== null) this.meta.dataset["for"] = this.messageId;
  }

  remove(): void {
    this.meta?.remove();
    this.element.remove();
  }
}

/** Set `data-status` on a message element (also one this page did not create). */
export function setMessageStatus(el: HTMLElement, status: string): void {
  el.dataset["status"] = status;
  // Screen readers hold back announcing a live region's change while it is busy.
  if (status === "streaming" || status === "pending") el.setAttribute("aria-busy", "true");
  else el.removeAttribute("aria-busy");
}

/** Read a `{{ value|json_script:"id" }}` block; undefined when absent or not JSON. */
export function readJsonScript(doc: Document, id: string): unknown {
  const el = doc.getElementById(id);
  if (el === null || el.textContent === null) return undefined;
  try {
    return JSON.parse(el.textContent) as unknown;
  } catch {
    return undefined;
  }
}

export interface HistoryItem {
  id: string;
  role: Role;
  content: string;
  status: string;
}

/** Validate the server-rendered history; skips malformed entries. */
export function parseHistory(data: unknown): HistoryItem[] {
  if (!Array.isArray(data)) return [];
  const out: HistoryItem[] = [];
  for (const item of data as unknown[]) {
    if (typeof item !== "object" || item === null) continue;
    const o = item as Record<string, unknown>;
    const role = o["role"];
    if (role !== "user" && role !== "assistant") continue;
    out.push({
      id: typeof o["id"] === "string" ? o["id"] : String(o["id"] ?? ""),
      role,
      content: typeof o["content"] === "string" ? o["content"] : "",
      status: typeof o["status"] === "string" && o["status"] !== "" ? o["status"] : "complete",
    });
  }
  return out;
}
