// Entry point: wires the chat page's DOM to the WebSocket protocol.

import { formatAnswerStats } from "./format.ts";
import {
  parseServerFrame,
  sendFrame,
  stopFrame,
  type AcceptedFrame,
  type DeltaFrame,
  type DoneFrame,
  type ErrorFrame,
  type SendFrame,
} from "./protocol.ts";
import { chatSocketUrl, ReconnectingSocket, type ConnectionState } from "./socket.ts";
import { MessageView, parseHistory, readJsonScript, setMessageStatus } from "./view.ts";

export interface ChatElements {
  log: HTMLElement;
  form: HTMLFormElement;
  input: HTMLTextAreaElement;
  send: HTMLButtonElement;
  stop: HTMLButtonElement;
  alert: HTMLElement;
  status: HTMLElement;
}

/** The transport the controller needs; ReconnectingSocket implements it. */
export interface Transport {
  send(data: string): boolean;
}

/** A chat.send waiting for chat.accepted. */
interface PendingSend {
  frame: SendFrame;
  user: MessageView;
  transmitted: boolean;
  sentAt: number;
}

/** The answer streaming now. */
interface ActiveAnswer {
  messageId: string;
  view: MessageView;
  sentAt: number;
  firstDeltaAt: number | null;
  firstPaintAt: number | null;
  lastSeq: number;
  stopId: string | null;
  done: DoneFrame | null;
}

export function newId(): string {
  const c = globalThis.crypto;
  if (typeof c.randomUUID === "function") return c.randomUUID();
  // randomUUID is missing outside secure contexts (plain http on a LAN address).
  const b = c.getRandomValues(new Uint8Array(16));
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x40;
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const STATE_TEXT: Record<ConnectionState, string> = {
  connecting: "connecting…",
  connected: "connected",
  reconnecting: "reconnecting…",
};

export class ChatController {
  private transport: Transport | null = null;
  private pending: PendingSend | null = null;
  private active: ActiveAnswer | null = null;
  private readonly doc: Document;

  constructor(
    private readonly el: ChatElements,
    private conversationId: string | null,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.doc = el.log.ownerDocument;
  }

  attach(transport: Transport): void {
    this.transport = transport;
    const { form, input, stop } = this.el;
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.submit();
    });
    input.addEventListener("keydown", (ev) => {
      if (ev.key !== "Enter" || ev.shiftKey || ev.isComposing || ev.keyCode === 229) return;
      ev.preventDefault();
      this.submit();
    });
    stop.addEventListener("click", () => this.requestStop());
    this.updateControls();
  }

  renderHistory(data: unknown): void {
    for (const item of parseHistory(data)) {
      const view = new MessageView(this.doc, item.role, item.status, item.id, item.content);
      this.el.log.appendChild(view.element);
    }
    this.el.log.scrollTop = this.el.log.scrollHeight;
  }

  // ---- connection ----

  onConnectionState(state: ConnectionState): void {
    this.el.status.textContent = STATE_TEXT[state];
    this.el.status.dataset["state"] = state;
  }

  onOpen(): void {
    // A send typed while offline, or cut off before chat.accepted, goes (again) now. The
    // server de-duplicates on the frame's id, so a repeat never starts a second answer.
    if (this.pending !== null) this.transmit(this.pending);
  }

  onClose(): void {
    if (this.pending !== null) this.pending.transmitted = false;
    const a = this.active;
    if (a !== null) {
      // The server keeps (and stores) the answer; this page just stops following it.
      this.active = null;
      a.view.setStatus("failed");
      a.view.setMeta("connection lost · reload to see the saved answer");
    }
    this.updateControls();
  }

  onMessage(raw: unknown): void {
    const frame = parseServerFrame(raw);
    if (frame === null) {
      console.warn("chat: ignoring unexpected frame", raw);
      return;
    }
    switch (frame.type) {
      case "chat.accepted":
        return this.onAccepted(frame);
      case "chat.delta":
        return this.onDelta(frame);
      case "chat.done":
        return this.onDone(frame);
      case "chat.error":
        return this.onError(frame);
    }
  }

  // ---- user actions ----

  get busy(): boolean {
    return this.pending !== null || this.active !== null;
  }

  submit(): void {
    if (this.busy) return;
    const text = this.el.input.value;
    if (text.trim() === "") return;
    this.clearAlert();
    const frame = sendFrame(newId(), this.conversationId, text);
    const user = new MessageView(this.doc, "user", "pending", null, text);
    this.appendToLog(user.element, true);
    this.pending = { frame, user, transmitted: false, sentAt: this.now() };
    this.transmit(this.pending);
    this.updateControls();
  }

  requestStop(): void {
    const a = this.active;
    if (a === null || a.stopId !== null) return;
    const id = newId();
    if (this.transport?.send(JSON.stringify(stopFrame(id, a.messageId))) !== true) {
      this.showAlert("Not connected: could not stop the answer.");
      return;
    }
    a.stopId = id;
    this.updateControls();
  }

  // ---- server frames ----

  private onAccepted(f: AcceptedFrame): void {
    const p = this.pending;
    if (p === null || p.frame.id !== f.id) return;
    this.pending = null;
    this.conversationId = f.conversation_id;
    this.updateUrl(f.conversation_id);
    if (this.el.input.value === p.frame.text) this.el.input.value = "";
    p.user.messageId = f.user_message_id;
    p.user.setStatus("complete");
    const view = new MessageView(this.doc, "assistant", "streaming", f.assistant_message_id);
    this.appendToLog(view.element, true);
    this.active = {
      messageId: f.assistant_message_id,
      view,
      sentAt: p.sentAt,
      firstDeltaAt: null,
      firstPaintAt: null,
      lastSeq: 0,
      stopId: null,
      done: null,
    };
    this.updateControls();
  }

  private onDelta(f: DeltaFrame): void {
    const a = this.active;
    if (a === null || a.messageId !== f.message_id) return;
    if (f.seq <= a.lastSeq) return; // repeated frame
    if (f.seq !== a.lastSeq + 1) console.warn(`chat: delta gap, expected seq ${a.lastSeq + 1}, got ${f.seq}`);
    a.lastSeq = f.seq;
    const stick = this.nearBottom();
    a.view.append(f.text);
    if (stick) this.el.log.scrollTop = this.el.log.scrollHeight;
    if (a.firstDeltaAt === null && f.text !== "") {
      a.firstDeltaAt = this.now();
      // The frame callback runs right before the browser paints the first token.
      if (typeof requestAnimationFrame === "function") {
        requestAnimationFrame(() => {
          a.firstPaintAt = this.now();
          // chat.done may already be here when a short answer arrives in one burst.
          if (a.done !== null) this.renderStats(a, a.done);
        });
      }
    }
  }

  private onDone(f: DoneFrame): void {
    const a = this.active;
    if (a === null || a.messageId !== f.message_id) {
      this.setStatusById(f.message_id, f.status);
      return;
    }
    this.active = null;
    a.done = f;
    a.view.setStatus(f.status);
    this.renderStats(a, f);
    this.updateControls();
    this.el.input.focus();
  }

  /** "first token 142 ms (server 97 ms) · 23 tokens" under the answer. */
  private renderStats(a: ActiveAnswer, f: DoneFrame): void {
    const first = a.firstPaintAt ?? a.firstDeltaAt;
    const clientTtft = first === null ? null : Math.max(0, first - a.sentAt);
    const data: Record<string, string> = {};
    if (clientTtft !== null) data["ttftMs"] = String(Math.round(clientTtft));
    if (f.timings.ttft_ms !== null) data["serverTtftMs"] = String(f.timings.ttft_ms);
    a.view.setMeta(
      formatAnswerStats({
        clientTtftMs: clientTtft,
        serverTtftMs: f.timings.ttft_ms,
        completionTokens: f.usage.completion_tokens,
        status: f.status,
        finishReason: f.finish_reason,
      }),
      data,
    );
  }

  private onError(f: ErrorFrame): void {
    this.showAlert(f.message || `Error: ${f.code}`);
    const p = this.pending;
    if (p !== null && f.id === p.frame.id) {
      // Not accepted: drop the bubble, keep the typed text in the textbox.
      this.pending = null;
      p.user.remove();
      this.updateControls();
      this.el.input.focus();
      return;
    }
    const a = this.active;
    if (a !== null && f.message_id === a.messageId && (a.stopId === null || f.id !== a.stopId)) {
      this.active = null;
      a.view.setStatus("failed");
      a.view.setMeta("failed");
      this.updateControls();
      return;
    }
    if (a !== null && a.stopId !== null && f.id === a.stopId) {
      a.stopId = null; // the stop was refused; allow another try
      this.updateControls();
      return;
    }
    if (f.message_id !== null && f.code === "engine") this.setStatusById(f.message_id, "failed");
  }

  // ---- helpers ----

  private transmit(p: PendingSend): void {
    if (p.transmitted) return;
    p.sentAt = this.now();
    p.transmitted = this.transport?.send(JSON.stringify(p.frame)) === true;
  }

  private updateControls(): void {
    this.el.send.disabled = this.busy;
    this.el.stop.disabled = this.active === null || this.active.stopId !== null;
  }

  private showAlert(message: string): void {
    this.el.alert.textContent = message;
    this.el.alert.hidden = false;
  }

  private clearAlert(): void {
    this.el.alert.textContent = "";
    this.el.alert.hidden = true;
  }

  private updateUrl(conversationId: string): void {
    const path = `/c/${encodeURIComponent(conversationId)}/`;
    if (globalThis.location?.pathname !== path) history.replaceState(history.state, "", path);
  }

  /** Status change for a message this page is not streaming (e.g. one from the history). */
  private setStatusById(messageId: string, status: string): void {
    for (const el of Array.from(this.el.log.querySelectorAll<HTMLElement>(".message[data-message-id]"))) {
      if (el.dataset["messageId"] === messageId) setMessageStatus(el, status);
    }
  }

  private nearBottom(): boolean {
    const log = this.el.log;
    return log.scrollHeight - log.scrollTop - log.clientHeight < 48;
  }

  private appendToLog(node: HTMLElement, scroll: boolean): void {
    this.el.log.appendChild(node);
    if (scroll) this.el.log.scrollTop = this.el.log.scrollHeight;
  }
}

function required<T extends HTMLElement>(doc: Document, id: string, type: new () => T): T {
  const el = doc.getElementById(id);
  if (!(el instanceof type)) throw new Error(`chat: missing #${id}`);
  return el;
}

export function start(doc: Document = document): ChatController {
  const el: ChatElements = {
    log: required(doc, "chat-log", HTMLElement),
    form: required(doc, "chat-form", HTMLFormElement),
    input: required(doc, "chat-input", HTMLTextAreaElement),
    send: required(doc, "chat-send", HTMLButtonElement),
    stop: required(doc, "chat-stop", HTMLButtonElement),
    alert: required(doc, "chat-alert", HTMLElement),
    status: required(doc, "connection-status", HTMLElement),
  };
  const conv = readJsonScript(doc, "conversation-id");
  const controller = new ChatController(el, typeof conv === "string" && conv !== "" ? conv : null);
  controller.renderHistory(readJsonScript(doc, "chat-history"));
  const socket = new ReconnectingSocket(chatSocketUrl(location), {
    onOpen: () => controller.onOpen(),
    onMessage: (data) => controller.onMessage(data),
    onClose: () => controller.onClose(),
    onState: (state) => controller.onConnectionState(state),
  });
  controller.attach(socket);
  socket.start();
  return controller;
}

if (typeof document !== "undefined" && document.getElementById("chat-log") !== null) {
  start();
}
