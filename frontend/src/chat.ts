// Entry point: wires the chat page's DOM to the WebSocket protocol.

import { canAskAssistant, isFinishedAnswer } from "./answers.ts";
import { formatAnswerStats } from "./format.ts";
import {
  feedbackFrame,
  parseServerFrame,
  regenerateFrame,
  resumeFrame,
  sendFrame,
  stopFrame,
  templatedSendFrame,
  withFullText,
  type AcceptedFrame,
  type AnswerSource,
  type DeltaFrame,
  type DoneFrame,
  type ErrorFrame,
  type FeedbackRecordedFrame,
  type Rating,
  type ResendFullFrame,
  type SendFrame,
  type SnapshotFrame,
} from "./protocol.ts";
import { chatSocketUrl, ReconnectingSocket, type ConnectionState } from "./socket.ts";
import {
  browserStorage,
  buildTemplatedSend,
  renderBody,
  TemplateDraft,
  TemplateStore,
  validateVariables,
  type PromptTemplate,
} from "./templates.ts";
import {
  markVariableErrors,
  MessageView,
  parseHistory,
  readJsonScript,
  readVariableFields,
  renderTemplateOptions,
  renderVariableFields,
  selectedTemplateId,
  setMessageStatus,
} from "./view.ts";

/** The template picker (`#template-picker` with `#template-select` and `#template-variables`). */
export interface TemplateElements {
  picker: HTMLElement;
  select: HTMLSelectElement;
  variables: HTMLElement;
}

export interface ChatElements {
  log: HTMLElement;
  form: HTMLFormElement;
  input: HTMLTextAreaElement;
  send: HTMLButtonElement;
  stop: HTMLButtonElement;
  alert: HTMLElement;
  status: HTMLElement;
  /** null: the page has no template picker. */
  templates: TemplateElements | null;
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
  /** The full text the user sends (for a templated frame, `frame.text` may be absent). */
  fullText: string;
  /** A templated frame was already resent with its full text after chat.resend_full. */
  resent: boolean;
}

/** A chat.regenerate waiting for chat.accepted. */
interface PendingRegenerate {
  id: string;
  messageId: string;
  view: MessageView;
  /** When the frame went out: the browser TTFT of the new answer counts from here. */
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
  private regenerating: PendingRegenerate | null = null;
  /** The assistant messages on the page, by id, and the conversation's newest one. */
  private readonly answers = new Map<string, MessageView>();
  private newestAnswerId: string | null = null;
  /** chat.feedback frames waiting for chat.feedback_recorded, by client id. */
  private readonly feedbackSent = new Map<string, { messageId: string; rating: Rating }>();
  /** A templated send is being prepared (patch + hash are computed asynchronously). */
  private preparing = false;
  private countdown: ReturnType<typeof setInterval> | null = null;
  private store: TemplateStore | null = null;
  private readonly draft = new TemplateDraft();
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

  /** Offer the templates of `store` when starting a new conversation. */
  attachTemplates(store: TemplateStore): void {
    this.store = store;
    const t = this.el.templates;
    if (t === null) return;
    store.subscribe(() => this.onTemplateList());
    t.select.addEventListener("change", () => this.onTemplateSelected());
    const onValues = () => this.onVariablesInput();
    t.variables.addEventListener("input", onValues);
    t.variables.addEventListener("change", onValues);
    // Enter in a variable field would submit the form half-filled; only the textbox sends.
    t.variables.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && ev.target instanceof HTMLInputElement) ev.preventDefault();
    });
    this.onTemplateList();
  }

  renderHistory(data: unknown): void {
    for (const item of parseHistory(data)) {
      const view = new MessageView(this.doc, item.role, item.status, item.id, item.content);
      this.el.log.appendChild(view.element);
      if (item.role === "assistant") {
        this.registerAnswer(view);
        if (isFinishedAnswer(item.status)) this.addAnswerActions(view, item.source, item.feedback);
        // Still being generated (the page was reloaded mid-answer): follow it from the
        // start once connected; the server replays what was said so far.
        else if (item.status === "streaming" && item.id !== null && this.active === null) {
          view.restart();
          this.startStreaming(item.id, view, this.now());
        }
      }
    }
    this.el.log.scrollTop = this.el.log.scrollHeight;
    this.updateAnswerControls();
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
    // A regenerate cut off before chat.accepted is not resent (a second one would answer a
    // third time): follow the message instead; it shows the new answer if the server
    // started one, the old one otherwise.
    const r = this.regenerating;
    if (r !== null) {
      this.regenerating = null;
      r.view.restart();
      this.startStreaming(r.messageId, r.view, r.sentAt);
    }
    // The server kept generating while we were away: get the rest, from the last seq shown.
    const a = this.active;
    if (a !== null) {
      a.view.setMeta("");
      this.transport?.send(JSON.stringify(resumeFrame(newId(), a.messageId, a.lastSeq)));
    }
  }

  onClose(): void {
    if (this.pending !== null) this.pending.transmitted = false;
    // Replies to these cannot come any more.
    this.feedbackSent.clear();
    const a = this.active;
    if (a !== null) {
      a.stopId = null;
      a.view.setMeta("connection lost · reconnecting to continue the answer…");
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
      case "chat.snapshot":
        return this.onSnapshot(frame);
      case "chat.feedback_recorded":
        return this.onFeedbackRecorded(frame);
      case "chat.error":
        return this.onError(frame);
      case "chat.resend_full":
        return this.onResendFull(frame);
      case "templates.changed":
        void this.store?.changed(frame.etag);
        return;
    }
  }

  // ---- user actions ----

  get busy(): boolean {
    return this.preparing || this.pending !== null || this.regenerating !== null || this.active !== null;
  }

  submit(): void {
    if (this.busy) return;
    const template = this.conversationId === null ? this.draft.template : null;
    if (template !== null && this.el.templates !== null) {
      void this.submitTemplated(template, this.el.templates);
      return;
    }
    const text = this.el.input.value;
    if (text.trim() === "") return;
    this.clearAlert();
    this.startSend(sendFrame(newId(), this.conversationId, text), text);
  }

  /** The first message of a new conversation, from the selected template. */
  private async submitTemplated(template: PromptTemplate, t: TemplateElements): Promise<void> {
    const { variables, errors } = validateVariables(template, readVariableFields(t.variables));
    const firstInvalid = markVariableErrors(
      t.variables,
      errors.map((e) => e.name),
    );
    if (errors.length > 0) {
      this.showAlert(errors.map((e) => e.message).join(" "));
      firstInvalid?.focus();
      return;
    }
    // While the textbox still shows the preview (placeholders of fields left empty), show
    // exactly what is sent: the render with the validated values.
    if (this.draft.untouched(this.el.input.value)) {
      const base = renderBody(template.body, variables);
      this.el.input.value = base;
      this.draft.base = base;
    }
    const edited = this.el.input.value;
    if (edited.trim() === "") return;
    this.clearAlert();
    const id = newId();
    this.preparing = true;
    this.updateControls();
    let frame: SendFrame;
    try {
      frame = await buildTemplatedSend(id, template, variables, edited);
    } catch (err) {
      console.warn("chat: templated send falls back to the full text", err);
      frame = templatedSendFrame(id, template, variables, { kind: "text", text: edited });
    } finally {
      this.preparing = false;
    }
    this.startSend(frame, edited);
  }

  private startSend(frame: SendFrame, fullText: string): void {
    const user = new MessageView(this.doc, "user", "pending", null, fullText);
    this.appendToLog(user.element, true);
    this.pending = { frame, user, transmitted: false, sentAt: this.now(), fullText, resent: false };
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

  /**
   * "Ask the assistant instead" under a FAQ answer: answer the same question again with the
   * model, into the same message. Only the conversation's newest answer, and only while
   * nothing is sent or streaming (the button is disabled otherwise).
   */
  askAssistant(messageId: string): void {
    const view = this.answers.get(messageId);
    if (view === undefined) return;
    if (!canAskAssistant({ source: view.source, messageId, newestAnswerId: this.newestAnswerId, busy: this.busy })) return;
    const id = newId();
    const sentAt = this.now();
    if (this.transport?.send(JSON.stringify(regenerateFrame(id, messageId, true))) !== true) {
      this.showAlert("Not connected: could not ask the assistant.");
      return;
    }
    this.clearAlert();
    this.regenerating = { id, messageId, view, sentAt };
    view.setActionsEnabled(false);
    this.updateControls();
  }

  /** Thumbs up/down: marked as pressed once the server answers chat.feedback_recorded. */
  rate(messageId: string, rating: Rating): void {
    const id = newId();
    if (this.transport?.send(JSON.stringify(feedbackFrame(id, messageId, rating))) !== true) {
      this.showAlert("Not connected: could not send your rating.");
      return;
    }
    this.feedbackSent.set(id, { messageId, rating });
  }

  // ---- server frames ----

  private onAccepted(f: AcceptedFrame): void {
    const r = this.regenerating;
    if (r !== null && r.id === f.id) {
      this.onRegenerateAccepted(r, f);
      return;
    }
    const p = this.pending;
    if (p === null || p.frame.id !== f.id) return;
    this.pending = null;
    this.conversationId = f.conversation_id;
    this.updateUrl(f.conversation_id);
    if (this.el.input.value === p.fullText) this.el.input.value = "";
    this.closeTemplates();
    p.user.messageId = f.user_message_id;
    p.user.setStatus("complete");
    const view = new MessageView(this.doc, "assistant", "streaming", f.assistant_message_id);
    this.appendToLog(view.element, true);
    this.registerAnswer(view);
    this.startStreaming(f.assistant_message_id, view, p.sentAt);
  }

  /** The server restarted the answer: stream the new one into the same message element. */
  private onRegenerateAccepted(r: PendingRegenerate, f: AcceptedFrame): void {
    this.regenerating = null;
    const view = this.answers.get(f.assistant_message_id) ?? r.view;
    view.restart();
    this.startStreaming(f.assistant_message_id, view, r.sentAt);
  }

  private startStreaming(messageId: string, view: MessageView, sentAt: number): void {
    this.active = {
      messageId,
      view,
      sentAt,
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
      const view = this.answers.get(f.message_id);
      if (view === undefined || this.regenerating?.view === view) {
        this.setStatusById(f.message_id, f.status);
        return;
      }
      view.setStatus(f.status);
      this.addAnswerActions(view, f.source, view.rating);
      this.updateControls();
      return;
    }
    this.active = null;
    a.done = f;
    a.view.setStatus(f.status);
    this.renderStats(a, f);
    this.addAnswerActions(a.view, f.source, null);
    this.updateControls();
    this.el.input.focus();
  }

  /** The server could not replay the missing part exactly: show its whole stored text. */
  private onSnapshot(f: SnapshotFrame): void {
    const a = this.active;
    if (a === null || a.messageId !== f.message_id) return;
    a.view.restart();
    a.view.append(f.content);
    a.lastSeq = Number.MAX_SAFE_INTEGER; // the done or error that follows ends it
  }

  private onFeedbackRecorded(f: FeedbackRecordedFrame): void {
    this.feedbackSent.delete(f.id);
    this.answers.get(f.message_id)?.setRating(f.rating);
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
    if (f.retry_after_s !== null && f.retry_after_s > 0) this.showCountdown(f.message || `Error: ${f.code}`, f.retry_after_s);
    else this.showAlert(f.message || `Error: ${f.code}`);
    // Answers to a rating or a regenerate first: their message_id may be the answer that
    // streams now, which they must not mark failed.
    if (f.id !== null && this.feedbackSent.delete(f.id)) return;
    const r = this.regenerating;
    if (r !== null && f.id === r.id) {
      // Not accepted: the answer stays as it was.
      this.regenerating = null;
      r.view.setActionsEnabled(true);
      this.updateControls();
      return;
    }
    const p = this.pending;
    if (p !== null && f.id === p.frame.id) {
      // Not accepted: drop the bubble, keep the typed text in the textbox.
      this.pending = null;
      p.user.remove();
      this.updateControls();
      this.el.input.focus();
      if (f.code === "template_unknown" && p.frame.template !== undefined) void this.afterTemplateUnknown(p.frame.template.id);
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

  /**
   * The server could not rebuild the templated text exactly: resend the same frame (same
   * id, template and variables) with the full text, once. A second request means the
   * server cannot take it; the text stays in the textbox.
   */
  private onResendFull(f: ResendFullFrame): void {
    const p = this.pending;
    if (p === null || p.frame.id !== f.id) return;
    if (p.resent) {
      this.pending = null;
      p.user.remove();
      this.showAlert("The message could not be sent from the template. Your text is kept: send it again, or choose “No template”.");
      this.updateControls();
      this.el.input.focus();
      return;
    }
    p.resent = true;
    p.frame = withFullText(p.frame, p.fullText);
    p.transmitted = false;
    this.transmit(p); // if the socket is down, onOpen sends it
  }

  // ---- templates ----

  private get offerTemplates(): boolean {
    return this.conversationId === null && this.el.templates !== null && this.store !== null;
  }

  /** The store's list changed (cache loaded, revalidated, or pushed). */
  private onTemplateList(): void {
    const t = this.el.templates;
    const store = this.store;
    if (t === null || store === null) return;
    if (this.offerTemplates) this.followNewVersion(t, store);
    renderTemplateOptions(t.select, store.templates, this.draft.template?.id ?? null, this.draft.template);
    this.updatePicker();
  }

  /**
   * The selected template was republished (or withdrawn). Choice, kept simple: only while
   * the textbox still holds the untouched render (the user has not typed in it) do we move
   * to the new version and re-render it (the variable values are kept by name). Once the
   * user has typed, their edits are relative to the old body, so the old reference stays:
   * the server takes it if that version is still published, answers `chat.resend_full`
   * (then the full text is resent) or `template_unknown` (then see afterTemplateUnknown).
   * Nothing changes while a send is in flight: its frame carries its own reference.
   */
  private followNewVersion(t: TemplateElements, store: TemplateStore): void {
    const cur = this.draft.template;
    if (cur === null || this.busy) return;
    const fresh = store.find(cur.id);
    if (fresh !== null && fresh.version === cur.version && fresh.sha256 === cur.sha256) return;
    if (!this.draft.untouched(this.el.input.value)) return;
    this.switchTemplate(t, fresh);
    if (fresh === null) this.showAlert(`The template “${cur.name}” is no longer available.`);
  }

  /** After `template_unknown`: refetch, then move to the current version (keeping the text) or drop the template. */
  private async afterTemplateUnknown(templateId: number): Promise<void> {
    const t = this.el.templates;
    const store = this.store;
    if (t === null || store === null) return;
    await store.revalidate();
    const cur = this.draft.template;
    if (!this.offerTemplates || this.busy || cur === null || cur.id !== templateId) return;
    const fresh = store.find(templateId);
    if (fresh !== null && fresh.version === cur.version && fresh.sha256 === cur.sha256) return;
    // The user's text stays; the next send patches it against the current version's render.
    this.switchTemplate(t, fresh);
    renderTemplateOptions(t.select, store.templates, this.draft.template?.id ?? null, this.draft.template);
    this.updatePicker();
    this.showAlert(
      fresh !== null
        ? `The template “${fresh.name}” was updated. Check your message, then send it again.`
        : `The template “${cur.name}” is no longer available. Your text is kept: send it without a template.`,
    );
  }

  /** Select `template` (null: none), keeping the typed variable values by name and any typed text. */
  private switchTemplate(t: TemplateElements, template: PromptTemplate | null): void {
    renderVariableFields(t.variables, template?.variables ?? [], readVariableFields(t.variables));
    const text = this.draft.select(template, readVariableFields(t.variables), this.el.input.value);
    if (text !== null) this.el.input.value = text;
  }

  private onTemplateSelected(): void {
    const t = this.el.templates;
    if (t === null || this.store === null) return;
    const id = selectedTemplateId(t.select);
    const held = this.draft.template;
    const template = id === null ? null : (this.store.find(id) ?? (held !== null && held.id === id ? held : null));
    renderVariableFields(t.variables, template?.variables ?? []);
    const text = this.draft.select(template, readVariableFields(t.variables), this.el.input.value);
    if (text !== null) this.el.input.value = text;
  }

  private onVariablesInput(): void {
    const t = this.el.templates;
    if (t === null) return;
    const text = this.draft.update(readVariableFields(t.variables), this.el.input.value);
    if (text !== null) this.el.input.value = text;
  }

  /** The conversation exists: templates are only for its first message. */
  private closeTemplates(): void {
    const t = this.el.templates;
    this.draft.clear();
    if (t === null) return;
    t.select.value = "";
    t.variables.replaceChildren();
    this.updatePicker();
  }

  private updatePicker(): void {
    const t = this.el.templates;
    if (t === null) return;
    const any = (this.store?.templates.length ?? 0) > 0 || this.draft.template !== null;
    t.picker.hidden = !(this.offerTemplates && any);
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
    this.updateAnswerControls();
  }

  /** "Ask the assistant instead" is usable on the newest answer only, while nothing streams. */
  private updateAnswerControls(): void {
    const busy = this.busy;
    for (const [messageId, view] of this.answers) {
      view.setAskEnabled(canAskAssistant({ source: view.source, messageId, newestAnswerId: this.newestAnswerId, busy }));
    }
  }

  private registerAnswer(view: MessageView): void {
    const id = view.messageId;
    if (id === null || id === "") return;
    this.answers.set(id, view);
    this.newestAnswerId = id;
  }

  /** The FAQ label and the buttons under a finished answer. */
  private addAnswerActions(view: MessageView, source: AnswerSource, rating: Rating | null): void {
    view.showAnswerActions(source, rating, {
      onAskAssistant: () => {
        const id = view.messageId;
        if (id !== null) this.askAssistant(id);
      },
      onRate: (r) => {
        const id = view.messageId;
        if (id !== null) this.rate(id, r);
      },
    });
  }

  private showAlert(message: string): void {
    this.stopCountdown();
    this.el.alert.textContent = message;
    this.el.alert.hidden = false;
  }

  private clearAlert(): void {
    this.stopCountdown();
    this.el.alert.textContent = "";
    this.el.alert.hidden = true;
  }

  /** "Busy" with a retry-after: count the seconds down, then clear the alert. */
  private showCountdown(message: string, seconds: number): void {
    this.showAlert(message);
    let left = Math.ceil(seconds);
    const render = () => {
      this.el.alert.textContent = `${message} (${left} s)`;
    };
    render();
    this.countdown = setInterval(() => {
      left -= 1;
      if (left > 0) render();
      else this.clearAlert();
    }, 1000);
  }

  private stopCountdown(): void {
    if (this.countdown !== null) clearInterval(this.countdown);
    this.countdown = null;
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

function templateElements(doc: Document): TemplateElements | null {
  const picker = doc.getElementById("template-picker");
  const select = doc.getElementById("template-select");
  const variables = doc.getElementById("template-variables");
  if (!(picker instanceof HTMLElement && select instanceof HTMLSelectElement && variables instanceof HTMLElement)) return null;
  return { picker, select, variables };
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
    templates: templateElements(doc),
  };
  const conv = readJsonScript(doc, "conversation-id");
  const controller = new ChatController(el, typeof conv === "string" && conv !== "" ? conv : null);
  controller.renderHistory(readJsonScript(doc, "chat-history"));
  const store = new TemplateStore({ fetch: (url, init) => fetch(url, init), storage: browserStorage() });
  store.load();
  controller.attachTemplates(store);
  void store.revalidate();
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
