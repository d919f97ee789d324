// The agent console (web/agent_console.html; docs/handoff.md): the customers waiting for a
// person or held by one, the open conversation's transcript, and the agent's replies and
// actions, over `/ws/agent/` (frames: ./generated/agent_frames.ts, from the server's schemas).
// Every text a customer or agent wrote goes in through textContent only.

import type * as Agent from "./generated/agent_frames.ts";
import { TYPING_EVERY_MS, TYPING_SHOWN_MS } from "./handoff.ts";
import { newId } from "./ids.ts";
import { showConnectionState } from "./page.ts";
import { chatSocketUrl, ReconnectingSocket } from "./socket.ts";

type Send = (frame: Agent.ClientFrame) => boolean;

export interface ConsoleElements {
  queue: HTMLElement;
  empty: HTMLElement;
  title: HTMLElement;
  log: HTMLElement;
  alert: HTMLElement;
  form: HTMLFormElement;
  input: HTMLTextAreaElement;
  send: HTMLButtonElement;
  release: HTMLButtonElement;
  close: HTMLButtonElement;
  /** Another agent's username, and the button that hands the conversation to them. */
  transferTo: HTMLInputElement;
  transfer: HTMLButtonElement;
  /** Said when closing: how it was resolved (kept with the handoff, in admin). */
  resolution: HTMLInputElement;
  status: HTMLElement;
  typing: HTMLElement;
  notify: HTMLButtonElement;
  /** Says the draft in the reply box is an approved FAQ answer, not the model's. */
  draftNote: HTMLElement;
}

/** What the console needs of the browser's notifications (Notification, injectable in tests). */
export interface Notifier {
  permission(): Promise<boolean>;
  show(title: string, body: string): void;
}

export const browserNotifier: Notifier = {
  permission: async () => typeof Notification !== "undefined" && (await Notification.requestPermission()) === "granted",
  show: (title, body) => {
    if (typeof Notification !== "undefined" && Notification.permission === "granted") new Notification(title, { body });
  },
};

function byId<T extends HTMLElement>(doc: Document, id: string, type: new () => T): T {
  const el = doc.getElementById(id);
  if (!(el instanceof type)) throw new Error(`console: missing #${id}`);
  return el;
}

export function consoleElements(doc: Document): ConsoleElements {
  return {
    queue: byId(doc, "console-queue", HTMLElement),
    empty: byId(doc, "console-empty", HTMLElement),
    title: byId(doc, "console-title", HTMLElement),
    log: byId(doc, "console-log", HTMLElement),
    alert: byId(doc, "console-alert", HTMLElement),
    form: byId(doc, "console-form", HTMLFormElement),
    input: byId(doc, "console-input", HTMLTextAreaElement),
    send: byId(doc, "console-send", HTMLButtonElement),
    release: byId(doc, "console-release", HTMLButtonElement),
    close: byId(doc, "console-close", HTMLButtonElement),
    resolution: byId(doc, "console-resolution", HTMLInputElement),
    transferTo: byId(doc, "console-transfer-to", HTMLInputElement),
    transfer: byId(doc, "console-transfer", HTMLButtonElement),
    status: byId(doc, "connection-status", HTMLElement),
    typing: byId(doc, "console-typing", HTMLElement),
    notify: byId(doc, "console-notify", HTMLButtonElement),
    draftNote: byId(doc, "console-draft-note", HTMLElement),
  };
}

/** How long someone has waited, in words a glance reads. */
export function waitedText(seconds: number): string {
  if (seconds < 60) return `${Math.max(0, Math.floor(seconds))} s`;
  const minutes = Math.floor(seconds / 60);
  return minutes < 60 ? `${minutes} min` : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** Why a customer asked, after their name in the list ("asked": the button, said by nothing). */
const REASONS: Record<string, string> = { offered: ", after the assistant offered", typed: ", asked in words" };
const ROLE_LABEL: Record<Agent.ConversationMessage["role"], string> = { user: "Customer", assistant: "Assistant", agent: "Agent" };

interface OpenConversation {
  conversationId: string;
  handoffId: number | null;
  state: Agent.TranscriptFrame["state"];
  /** Held by this agent: the reply box and the buttons work. */
  mine: boolean;
}

export class AgentConsole {
  private items: Agent.QueueItem[] = [];
  private open: OpenConversation | null = null;
  private readonly shown = new Set<string>();
  /** The reply sent and not yet stored (its text leaves the box once it is). */
  private pendingReply: { id: string; text: string } | null = null;
  /** The model's draft of the reply, streaming into the reply box while the agent has not
   * written anything of their own. */
  private draft: { conversationId: string; draftId: string; text: string } | null = null;
  private send: Send = () => false;
  private typingSentAt = -Infinity;
  /** Waiting customers already seen (null until the first queue: those are not announced). */
  private seenWaiting: Set<number> | null = null;
  private notifying = false;
  private typingTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly el: ConsoleElements,
    private readonly notifier: Notifier = browserNotifier,
  ) {
    el.notify.addEventListener("click", () => void this.optIn());
    el.form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.reply();
    });
    // The agent writes: their words, not the model's; the draft stops (kept as written so far).
    el.input.addEventListener("input", () => {
      this.stopDraft();
      this.typingShown();
    });
    el.input.addEventListener("keydown", (ev) => {
      if (ev.key !== "Enter" || ev.shiftKey || ev.isComposing) return;
      ev.preventDefault();
      this.reply();
    });
    el.release.addEventListener("click", () => this.act("agent.release"));
    el.close.addEventListener("click", () => this.act("agent.close"));
    el.transfer.addEventListener("click", () => this.transferTo());
  }

  attach(send: Send): void {
    this.send = send;
  }

  /** (Re)connected: the server sends the queue; the open conversation is caught up. */
  onOpen(): void {
    if (this.open === null) return;
    const last = [...this.shown].at(-1) ?? null;
    this.send({ type: "agent.open", id: newId(), conversation_id: this.open.conversationId, after_message_id: last });
  }

  onMessage(raw: unknown): void {
    if (typeof raw !== "string") return;
    let frame: Agent.ServerFrame;
    try {
      frame = JSON.parse(raw) as Agent.ServerFrame;
    } catch {
      return;
    }
    switch (frame.type) {
      case "agent.queue":
        return this.showQueue(frame.items);
      case "agent.transcript":
        return this.showTranscript(frame);
      case "agent.message":
        return this.showMessage(frame);
      case "agent.handoff":
        return this.onHandoff(frame);
      case "agent.draft":
        return this.onDraft(frame);
      case "agent.customer_typing":
        if (this.open?.conversationId === frame.conversation_id) this.showCustomerTyping();
        return;
      case "agent.error":
        this.el.alert.textContent = frame.message;
        this.el.alert.hidden = false;
        if (this.pendingReply !== null && frame.id === this.pendingReply.id) this.pendingReply = null;
        return;
    }
  }

  /** Take a waiting customer, or look at one (a held conversation is opened). */
  choose(item: Agent.QueueItem): void {
    this.clearAlert();
    if (item.state === "waiting") this.send({ type: "agent.claim", id: newId(), handoff_id: item.handoff_id });
    this.openConversation(item.conversation_id);
  }

  private openConversation(conversationId: string): void {
    this.clearDraft();
    this.el.input.value = "";
    this.open = { conversationId, handoffId: null, state: "waiting", mine: false };
    this.shown.clear();
    this.el.log.replaceChildren();
    this.send({ type: "agent.open", id: newId(), conversation_id: conversationId, after_message_id: null });
    this.updateControls();
  }

  private onDraft(f: Agent.AgentDraftFrame): void {
    if (this.open?.conversationId !== f.conversation_id || !this.open.mine) return;
    const input = this.el.input;
    if (f.status === "streaming") {
      if (this.draft === null || this.draft.draftId !== f.draft_id) {
        if (input.value.trim() !== "") return; // the agent's own words are never replaced
        this.draft = { conversationId: f.conversation_id, draftId: f.draft_id, text: "" };
        input.value = "";
        this.el.draftNote.hidden = true;
      }
      this.draft.text += f.text;
      input.value = this.draft.text;
      input.dataset["draft"] = "streaming";
      return;
    }
    if (this.draft?.draftId === f.draft_id) {
      this.draft = null;
      if (input.dataset["draft"] !== undefined) {
        input.dataset["draft"] = "ready";
        this.el.draftNote.hidden = !(f.status === "done" && f.source === "faq");
      }
    }
  }

  /** No draft any more: the agent wrote, sent, or opened another conversation. */
  private clearDraft(): void {
    this.draft = null;
    delete this.el.input.dataset["draft"];
    this.el.draftNote.hidden = true;
  }

  /** The customer sees "Dana is typing…" while the agent writes to them. */
  private typingShown(): void {
    const open = this.open;
    if (open === null || !open.mine) return;
    const now = performance.now();
    if (now - this.typingSentAt < TYPING_EVERY_MS) return;
    this.typingSentAt = now;
    this.send({ type: "agent.typing", id: newId(), conversation_id: open.conversationId });
  }

  private showCustomerTyping(): void {
    if (this.typingTimer !== null) clearTimeout(this.typingTimer);
    this.el.typing.textContent = "The customer is typing…";
    this.typingTimer = setTimeout(() => {
      this.typingTimer = null;
      this.el.typing.textContent = "";
    }, TYPING_SHOWN_MS);
  }

  private stopDraft(): void {
    const draft = this.draft;
    this.el.draftNote.hidden = true; // the words are the agent's now
    if (draft === null) return;
    this.clearDraft();
    this.send({ type: "agent.draft_stop", id: newId(), conversation_id: draft.conversationId });
  }

  private reply(): void {
    const open = this.open;
    const text = this.el.input.value;
    if (open === null || !open.mine || open.handoffId === null || text.trim() === "" || this.pendingReply !== null) return;
    const id = newId();
    if (!this.send({ type: "agent.send", id, handoff_id: open.handoffId, text })) {
      this.showAlert("Not connected: the reply was not sent.");
      return;
    }
    this.pendingReply = { id, text };
    this.clearDraft();
  }

  private act(type: "agent.release" | "agent.close"): void {
    const open = this.open;
    if (open === null || open.handoffId === null) return;
    this.clearAlert();
    if (type === "agent.close") {
      this.send({ type, id: newId(), handoff_id: open.handoffId, resolution: this.el.resolution.value.trim() });
      this.el.resolution.value = "";
    } else this.send({ type, id: newId(), handoff_id: open.handoffId });
  }

  /** The agent opts in to a notification for each new waiting customer. */
  private async optIn(): Promise<void> {
    this.notifying = await this.notifier.permission();
    this.el.notify.textContent = this.notifying ? "Notifications on" : "Notifications blocked by the browser";
    this.el.notify.disabled = this.notifying;
  }

  private announceNew(items: Agent.QueueItem[]): void {
    const waiting = items.filter((i) => i.state === "waiting");
    const seen = this.seenWaiting;
    this.seenWaiting = new Set(waiting.map((i) => i.handoff_id));
    if (seen === null || !this.notifying) return;
    for (const item of waiting) {
      if (!seen.has(item.handoff_id)) this.notifier.show("A customer is waiting", item.first_question);
    }
  }

  /** Hand the conversation to another agent (their console gets it with its draft). */
  private transferTo(): void {
    const open = this.open;
    const to = this.el.transferTo.value.trim();
    if (open === null || !open.mine || open.handoffId === null || to === "") return;
    this.clearAlert();
    this.send({ type: "agent.transfer", id: newId(), handoff_id: open.handoffId, to_agent: to });
    this.el.transferTo.value = "";
  }

  private showQueue(items: Agent.QueueItem[]): void {
    this.announceNew(items);
    this.items = items;
    const doc = this.el.queue.ownerDocument;
    const rows = items.map((item) => {
      const li = doc.createElement("li");
      li.className = "console-item";
      li.dataset["state"] = item.state;
      li.dataset["conversationId"] = item.conversation_id;
      const button = doc.createElement("button");
      button.type = "button";
      const who = item.site === null ? item.customer : `${item.customer}, ${item.site}`;
      const status = item.state === "waiting" ? `waiting ${waitedText(item.waited_s)}` : item.mine ? "with you" : `with ${item.agent ?? "an agent"}`;
      button.textContent = `${who} (${status}${REASONS[item.reason] ?? ""})`;
      button.addEventListener("click", () => this.choose(item));
      const question = doc.createElement("p");
      question.className = "console-question";
      question.textContent = item.first_question;
      const last = doc.createElement("p");
      last.className = "console-last";
      last.textContent = item.last_message;
      li.append(button, question, last);
      if (item.near_entries.length > 0) {
        const near = doc.createElement("p");
        near.className = "console-near";
        near.textContent = `Close to the FAQ: ${item.near_entries.map((q) => `“${q}”`).join(", ")}`;
        li.append(near);
      }
      if (item.contact_email !== null) {
        const contact = doc.createElement("p");
        contact.className = "console-contact";
        contact.textContent = `Write back to ${item.contact_email}`;
        li.append(contact);
      }
      return li;
    });
    this.el.queue.replaceChildren(...rows);
    this.el.empty.hidden = items.length > 0;
    const open = this.open;
    const current = open === null ? undefined : items.find((i) => i.conversation_id === open.conversationId);
    if (open !== null && current !== undefined) {
      open.handoffId = current.handoff_id;
      open.state = current.state;
      open.mine = current.mine;
      this.updateControls();
    }
  }

  private showTranscript(f: Agent.TranscriptFrame): void {
    const open = this.open;
    if (open === null || open.conversationId !== f.conversation_id) return;
    open.handoffId = f.handoff_id;
    open.state = f.state;
    open.mine = f.mine;
    for (const m of f.messages) this.appendMessage(m);
    this.updateControls();
  }

  private showMessage(f: Agent.AgentMessageFrame): void {
    if (this.pendingReply !== null && f.id === this.pendingReply.id) {
      if (this.el.input.value === this.pendingReply.text) this.el.input.value = "";
      this.pendingReply = null;
    }
    if (this.open?.conversationId !== f.conversation_id) return;
    if (f.message.role === "user" && this.typingTimer !== null) {
      clearTimeout(this.typingTimer);
      this.typingTimer = null;
      this.el.typing.textContent = "";
    }
    this.appendMessage(f.message);
  }

  private onHandoff(f: Agent.AgentHandoffFrame): void {
    const open = this.open;
    if (open === null || open.conversationId !== f.conversation_id) return;
    open.handoffId = f.handoff_id;
    open.state = f.state;
    open.mine = f.mine;
    this.updateControls();
  }

  private appendMessage(m: Agent.ConversationMessage): void {
    if (this.shown.has(m.id)) return;
    this.shown.add(m.id);
    const doc = this.el.log.ownerDocument;
    const el = doc.createElement("div");
    el.className = `message message-${m.role === "user" ? "user" : m.role}`;
    el.dataset["role"] = m.role;
    el.dataset["messageId"] = m.id;
    if (m.role === "agent") el.dataset["sender"] = m.sender ?? ROLE_LABEL.agent;
    const body = doc.createElement("div");
    body.className = "message-body";
    body.textContent = m.content;
    el.append(body);
    this.el.log.append(el);
    this.el.log.scrollTop = this.el.log.scrollHeight;
  }

  private updateControls(): void {
    const open = this.open;
    const mine = open !== null && open.mine;
    this.el.input.disabled = !mine;
    this.el.send.disabled = !mine;
    this.el.release.disabled = !mine;
    this.el.close.disabled = !(mine || open?.state === "waiting");
    this.el.resolution.disabled = this.el.close.disabled;
    this.el.transferTo.disabled = !mine;
    this.el.transfer.disabled = !mine;
    if (open === null) return;
    const item = this.items.find((i) => i.conversation_id === open.conversationId);
    const who = item === undefined ? "Customer" : item.site === null ? item.customer : `${item.customer}, ${item.site}`;
    const where = open.state === "with_agent" ? (mine ? "with you" : "with another agent") : open.state === "waiting" ? "waiting" : open.state === "bot" ? "back with the assistant" : "closed";
    this.el.title.textContent = `${who}: ${where}`;
  }

  private showAlert(message: string): void {
    this.el.alert.textContent = message;
    this.el.alert.hidden = false;
  }

  private clearAlert(): void {
    this.el.alert.hidden = true;
    this.el.alert.textContent = "";
  }
}

export function startConsole(doc: Document = document): AgentConsole {
  const root = doc.getElementById("agent-console");
  const el = consoleElements(doc);
  const console_ = new AgentConsole(el);
  const socket = new ReconnectingSocket(chatSocketUrl(location, root?.dataset["socket"] ?? "/ws/agent/"), {
    onOpen: () => console_.onOpen(),
    onMessage: (data) => console_.onMessage(data),
    onState: (state) => showConnectionState(el.status, state),
  });
  console_.attach((frame) => socket.send(JSON.stringify(frame)));
  socket.start();
  return console_;
}

if (typeof document !== "undefined" && document.getElementById("agent-console") !== null) {
  startConsole();
}
