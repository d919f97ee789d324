// Entry point: wires the chat page's DOM to the WebSocket protocol.

import { canAskAssistant, isFinishedAnswer, isRegenerable, showsRegenerate } from "./answers.ts";
import { AutoScroller } from "./autoscroll.ts";
import { ConversationList, parseConversations, type FetchJson } from "./conversations.ts";
import { formatAnswerStats } from "./format.ts";
import {
  clientTimingFrame,
  editFrame,
  feedbackFrame,
  hasCode,
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
import { defaultScheduler, type FrameScheduler } from "./stream.ts";
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
  type Role,
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

export interface ControllerOptions {
  /** Clock for the TTFT measurements (default performance.now). */
  now?: () => number;
  /** When streamed answer text is rendered (default requestAnimationFrame). */
  scheduler?: FrameScheduler;
  /**
   * Reload the page. Used when the connection dropped between an edit and its
   * `chat.accepted`: whether the server applied it is unknown, and a repeated `chat.edit`
   * would answer again, so the page shows the server's state instead.
   */
  reload?: () => void;
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

/** A chat.edit waiting for chat.accepted. */
interface PendingEdit {
  id: string;
  /** The question being edited. */
  view: MessageView;
  /** Its text before the edit (shown again if the edit is refused). */
  oldText: string;
  text: string;
  sentAt: number;
}

/** The answer streaming now. */
interface ActiveAnswer {
  messageId: string;
  view: MessageView;
  sentAt: number;
  firstDeltaAt: number | null;
  firstPaintAt: number | null;
  /**
   * `sentAt` is when this page sent the frame that asked for the answer, so its time to
   * first token is reported (`chat.client_timing`); false for an answer followed after a
   * reload, whose request was sent by an earlier page.
   */
  measured: boolean;
  /** The time to first token was reported. */
  timingReported: boolean;
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
  private editing: PendingEdit | null = null;
  /** Every message view on the page, by element. */
  private readonly views = new Map<HTMLElement, MessageView>();
  /** The assistant messages on the page, by id, and the conversation's newest one. */
  private readonly answers = new Map<string, MessageView>();
  private newestAnswerId: string | null = null;
  /** The user messages on the page, by id (they have "Edit"). */
  private readonly questions = new Map<string, MessageView>();
  /** The question whose inline editor is open. */
  private editorView: MessageView | null = null;
  private readonly scroller: AutoScroller;
  private conversations: ConversationList | null = null;
  private fetchJson: FetchJson | null = null;
  private connectedBefore = false;
  /** Rendering the page's history: one scroll at the end instead of one per message. */
  private loadingHistory = false;
  /** chat.feedback frames waiting for chat.feedback_recorded, by client id. */
  private readonly feedbackSent = new Map<string, { messageId: string; rating: Rating }>();
  /** Ids of chat.client_timing frames sent: a refusal of one is not the user's business. */
  private readonly timingSent = new Set<string>();
  /** A templated send is being prepared (patch + hash are computed asynchronously). */
  private preparing = false;
  private countdown: ReturnType<typeof setInterval> | null = null;
  private store: TemplateStore | null = null;
  private readonly draft = new TemplateDraft();
  private readonly doc: Document;
  private readonly now: () => number;
  private readonly scheduler: FrameScheduler;
  private readonly reload: () => void;

  constructor(
    private readonly el: ChatElements,
    private conversationId: string | null,
    options: ControllerOptions = {},
  ) {
    this.doc = el.log.ownerDocument;
    this.now = options.now ?? (() => performance.now());
    this.scheduler = options.scheduler ?? defaultScheduler();
    this.reload = options.reload ?? (() => globalThis.location.reload());
    this.scroller = new AutoScroller(el.log);
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

  /**
   * The sidebar's conversation list (`nav[aria-label="Conversations"]`), filled from the
   * page's `conversations` block; `fetchJson` refreshes it after a reconnect.
   */
  attachConversations(list: ConversationList, data: unknown, fetchJson: FetchJson | null = null): void {
    this.conversations = list;
    this.fetchJson = fetchJson;
    list.show(parseConversations(data));
  }

  /** Reload the conversation list from the server (no-op without one). */
  refreshConversations(): void {
    const list = this.conversations;
    if (list !== null && this.fetchJson !== null) void list.refresh(this.fetchJson);
  }

  renderHistory(data: unknown): void {
    this.loadingHistory = true;
    for (const item of parseHistory(data)) {
      const view = this.newView(item.role, item.status, item.id, item.content);
      this.el.log.appendChild(view.element);
      if (item.role === "user") {
        this.registerQuestion(view);
        continue;
      }
      this.registerAnswer(view);
      if (isFinishedAnswer(item.status)) this.addAnswerActions(view, item.source, item.feedback);
      else if (item.status === "failed") this.addAnswerActions(view, item.source, null, false);
      // Still being generated (the page was reloaded mid-answer): follow it from the
      // start once connected; the server replays what was said so far.
      else if (item.status === "streaming" && item.id !== null && this.active === null) {
        view.restart();
        this.startStreaming(item.id, view, this.now(), false);
      }
    }
    this.loadingHistory = false;
    this.scroller.jumpToBottom();
    this.updateAnswerControls();
  }

  // ---- connection ----

  onConnectionState(state: ConnectionState): void {
    this.el.status.textContent = STATE_TEXT[state];
    this.el.status.dataset["state"] = state;
  }

  onOpen(): void {
    // An edit cut off before chat.accepted: the server may or may not have applied it, and
    // sending it again would answer again. Show what the server has.
    if (this.editing !== null) {
      this.reload();
      return;
    }
    // Titles or new conversations from other tabs, while we were away.
    if (this.connectedBefore) this.refreshConversations();
    this.connectedBefore = true;
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
    this.timingSent.clear();
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
    return this.preparing || this.pending !== null || this.regenerating !== null || this.editing !== null || this.active !== null;
  }

  /** Whether the log follows the streaming answer (the user has not scrolled up). */
  get followingStream(): boolean {
    return this.scroller.following;
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
    this.closeEditor();
    const user = this.newView("user", "pending", null, fullText);
    this.el.log.appendChild(user.element);
    this.scroller.jumpToBottom();
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
    this.startRegenerate(view, messageId, true);
  }

  /** "Regenerate" under the newest answer: answer the same question again (FAQ first, as for a send). */
  regenerate(messageId: string): void {
    const view = this.answers.get(messageId);
    if (view === undefined || this.busy || !showsRegenerate(messageId, this.newestAnswerId) || !isRegenerable(view.status)) return;
    this.startRegenerate(view, messageId, false);
  }

  private startRegenerate(view: MessageView, messageId: string, bypassFaq: boolean): void {
    const id = newId();
    const sentAt = this.now();
    if (this.transport?.send(JSON.stringify(regenerateFrame(id, messageId, bypassFaq))) !== true) {
      this.showAlert(bypassFaq ? "Not connected: could not ask the assistant." : "Not connected: could not regenerate the answer.");
      return;
    }
    this.clearAlert();
    this.closeEditor();
    this.regenerating = { id, messageId, view, sentAt };
    view.setActionsEnabled(false);
    this.updateControls();
  }

  /** "Edit" under a question: open its inline editor with its text. */
  startEdit(messageId: string): void {
    const view = this.questions.get(messageId);
    if (view === undefined || this.busy) return;
    this.openEditor(view, view.text);
  }

  /**
   * Save an edited question: `chat.edit`. The question shows the new text (pending) until
   * `chat.accepted`; then every later message is removed and the answer streams again.
   */
  submitEdit(messageId: string, text: string): void {
    const view = this.questions.get(messageId);
    if (view === undefined || this.busy) return;
    if (text.trim() === "") {
      this.showAlert("The question cannot be empty.");
      return;
    }
    const id = newId();
    const sentAt = this.now();
    if (this.transport?.send(JSON.stringify(editFrame(id, messageId, text))) !== true) {
      this.showAlert("Not connected: could not send the edited question.");
      return;
    }
    this.clearAlert();
    this.editing = { id, view, oldText: view.text, text, sentAt };
    this.closeEditor();
    view.setText(text);
    view.setStatus("pending");
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
    const e = this.editing;
    if (e !== null && e.id === f.id) {
      this.onEditAccepted(e, f);
      return;
    }
    const p = this.pending;
    if (p === null || p.frame.id !== f.id) return;
    this.pending = null;
    const isNew = this.conversationId === null;
    this.conversationId = f.conversation_id;
    this.updateUrl(f.conversation_id);
    this.conversations?.touch(f.conversation_id, isNew ? p.fullText : null);
    if (this.el.input.value === p.fullText) this.el.input.value = "";
    this.closeTemplates();
    p.user.messageId = f.user_message_id;
    p.user.setStatus("complete");
    this.registerQuestion(p.user);
    const view = this.newView("assistant", "streaming", f.assistant_message_id);
    this.el.log.appendChild(view.element);
    this.scroller.contentChanged();
    this.registerAnswer(view);
    this.startStreaming(f.assistant_message_id, view, p.sentAt);
  }

  /** The edit is stored: later messages go, the answer streams again right under the question. */
  private onEditAccepted(e: PendingEdit, f: AcceptedFrame): void {
    this.editing = null;
    const question = e.view;
    question.setStatus("complete");
    if (question.messageId !== f.user_message_id) {
      const old = question.messageId;
      if (old !== null) this.questions.delete(old);
      question.messageId = f.user_message_id;
      this.registerQuestion(question);
    }
    let answer = this.answers.get(f.assistant_message_id) ?? null;
    answer?.restart();
    this.removeAfter(question, answer);
    if (answer === null) {
      answer = this.newView("assistant", "streaming", f.assistant_message_id);
      const last = question.nodes.at(-1) ?? question.element;
      last.after(answer.element);
    }
    this.registerAnswer(answer);
    this.conversations?.touch(f.conversation_id, null);
    this.scroller.jumpToBottom();
    this.startStreaming(f.assistant_message_id, answer, e.sentAt);
  }

  /** The server restarted the answer: stream the new one into the same message element. */
  private onRegenerateAccepted(r: PendingRegenerate, f: AcceptedFrame): void {
    this.regenerating = null;
    const view = this.answers.get(f.assistant_message_id) ?? r.view;
    view.restart();
    this.startStreaming(f.assistant_message_id, view, r.sentAt);
  }

  private startStreaming(messageId: string, view: MessageView, sentAt: number, measured = true): void {
    this.active = {
      messageId,
      view,
      sentAt,
      firstDeltaAt: null,
      firstPaintAt: null,
      measured,
      timingReported: false,
      lastSeq: 0,
      stopId: null,
      done: null,
    };
    this.updateControls();
  }

  /**
   * A delta only extends the streaming answer's text; its body renders at the next animation
   * frame (all deltas of a frame at once), and nothing else on the page is touched.
   */
  private onDelta(f: DeltaFrame): void {
    const a = this.active;
    if (a === null || a.messageId !== f.message_id) return;
    if (f.seq <= a.lastSeq) return; // repeated frame
    if (f.seq !== a.lastSeq + 1) console.warn(`chat: delta gap, expected seq ${a.lastSeq + 1}, got ${f.seq}`);
    a.lastSeq = f.seq;
    // Blank text paints nothing: the first token is the first one that shows.
    if (a.firstDeltaAt === null && f.text.trim() !== "") a.firstDeltaAt = this.now();
    a.view.append(f.text);
  }

  /** An answer's body was rendered (in an animation frame, or flushed at its end). */
  private onBodyRendered(view: MessageView): void {
    const a = this.active;
    // The frame callback runs right before the browser paints the first token.
    if (a !== null && a.view === view && a.firstPaintAt === null && a.firstDeltaAt !== null) {
      a.firstPaintAt = this.now();
      this.reportTiming(a);
    }
    if (!this.loadingHistory) this.scroller.contentChanged();
  }

  /**
   * Tell the server how long this answer's first token took to show, once (for its
   * metrics). Sent at the first paint; if the socket was down then, at the answer's end.
   */
  private reportTiming(a: ActiveAnswer): void {
    if (!a.measured || a.timingReported || a.firstPaintAt === null) return;
    const id = newId();
    const frame = clientTimingFrame(id, a.messageId, a.firstPaintAt - a.sentAt);
    if (frame === null) {
      a.timingReported = true; // nothing the server would take: never send it
      return;
    }
    if (this.transport?.send(JSON.stringify(frame)) !== true) return;
    a.timingReported = true;
    this.timingSent.add(id);
  }

  private onDone(f: DoneFrame): void {
    const a = this.active;
    if (a === null || a.messageId !== f.message_id) {
      const view = this.answers.get(f.message_id);
      if (view === undefined || this.regenerating?.view === view) {
        this.setStatusById(f.message_id, f.status);
        return;
      }
      view.flush();
      view.setStatus(f.status);
      this.addAnswerActions(view, f.source, view.rating);
      this.updateControls();
      return;
    }
    a.view.flush();
    this.reportTiming(a);
    this.active = null;
    a.done = f;
    a.view.setStatus(f.status);
    this.renderStats(a, f);
    this.addAnswerActions(a.view, f.source, null);
    this.updateControls();
    // The stats line and the buttons are part of the answer: keep them in view.
    this.scroller.contentChanged();
    this.el.input.focus();
  }

  /** The server could not replay the missing part exactly: show its whole stored text. */
  private onSnapshot(f: SnapshotFrame): void {
    const a = this.active;
    if (a === null || a.messageId !== f.message_id) return;
    a.view.setText(f.content);
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
    // A refused timing report (e.g. already reported from another tab) changes nothing shown.
    if (f.id !== null && this.timingSent.delete(f.id)) {
      console.warn(`chat: timing report refused: ${f.code} ${f.message}`);
      return;
    }
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
    const e = this.editing;
    if (e !== null && f.id === e.id) {
      // Not accepted: nothing changed on the server. The question shows its old text again
      // and the editor reopens with the edited one.
      this.editing = null;
      e.view.setText(e.oldText);
      e.view.setStatus("complete");
      this.updateControls();
      this.openEditor(e.view, e.text);
      return;
    }
    const p = this.pending;
    if (p !== null && f.id === p.frame.id) {
      // Not accepted: drop the bubble, keep the typed text in the textbox.
      this.pending = null;
      p.user.remove();
      this.updateControls();
      this.el.input.focus();
      if (hasCode(f, "template_unknown") && p.frame.template !== undefined && p.frame.template !== null) void this.afterTemplateUnknown(p.frame.template.id);
      return;
    }
    const a = this.active;
    if (a !== null && f.message_id === a.messageId && (a.stopId === null || f.id !== a.stopId)) {
      a.view.flush();
      this.active = null;
      a.view.setStatus("failed");
      a.view.setMeta("failed");
      this.addAnswerActions(a.view, a.view.source, null, false);
      this.updateControls();
      this.scroller.contentChanged();
      return;
    }
    if (a !== null && a.stopId !== null && f.id === a.stopId) {
      a.stopId = null; // the stop was refused; allow another try
      this.updateControls();
      return;
    }
    if (f.message_id !== null && hasCode(f, "engine")) this.setStatusById(f.message_id, "failed");
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

  /**
   * Under the answers: "Ask the assistant instead" and "Regenerate" on the newest answer only,
   * usable while nothing is sent or streaming; "Edit" on the questions, likewise.
   */
  private updateAnswerControls(): void {
    const busy = this.busy;
    for (const [messageId, view] of this.answers) {
      view.setAskEnabled(canAskAssistant({ source: view.source, messageId, newestAnswerId: this.newestAnswerId, busy }));
      const shown = showsRegenerate(messageId, this.newestAnswerId);
      view.setRegenerateState(shown, shown && !busy && isRegenerable(view.status));
    }
    for (const view of this.questions.values()) view.setEditEnabled(!busy);
  }

  private newView(role: Role, status: string, messageId: string | null, content = ""): MessageView {
    const view = new MessageView(this.doc, role, status, messageId, content, {
      scheduler: this.scheduler,
      onRender: (v) => this.onBodyRendered(v),
    });
    this.views.set(view.element, view);
    return view;
  }

  private registerAnswer(view: MessageView): void {
    const id = view.messageId;
    if (id === null || id === "") return;
    this.answers.set(id, view);
    this.newestAnswerId = id;
  }

  /** A stored question: it gets "Edit". */
  private registerQuestion(view: MessageView): void {
    const id = view.messageId;
    if (id === null || id === "") return;
    this.questions.set(id, view);
    view.showQuestionActions(() => {
      const current = view.messageId;
      if (current !== null) this.startEdit(current);
    });
    view.setEditEnabled(!this.busy);
  }

  /** Remove every message after `view` from the page (`keep`, if given, stays). */
  private removeAfter(view: MessageView, keep: MessageView | null): void {
    const last = view.nodes.at(-1) ?? view.element;
    const later: ChildNode[] = [];
    for (let n = last.nextSibling; n !== null; n = n.nextSibling) later.push(n);
    for (const n of later) {
      if (!n.isConnected || (keep !== null && n === keep.element)) continue;
      const v = this.views.get(n as HTMLElement);
      if (v === undefined) {
        n.remove();
        continue;
      }
      this.forget(v);
      v.remove();
    }
    if (this.newestAnswerId !== null && !this.answers.has(this.newestAnswerId)) this.newestAnswerId = null;
  }

  private forget(view: MessageView): void {
    this.views.delete(view.element);
    const id = view.messageId;
    if (id === null) return;
    if (this.answers.get(id) === view) this.answers.delete(id);
    if (this.questions.get(id) === view) this.questions.delete(id);
    if (this.editorView === view) this.editorView = null;
  }

  private openEditor(view: MessageView, text: string): void {
    if (this.editorView !== null && this.editorView !== view) this.editorView.closeEditor();
    this.editorView = view;
    const input = view.openEditor(text, {
      onSave: (t) => {
        const id = view.messageId;
        if (id !== null) this.submitEdit(id, t);
      },
      onCancel: () => {
        this.editorView = null;
        view.closeEditor(true);
      },
    });
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  }

  private closeEditor(): void {
    this.editorView?.closeEditor();
    this.editorView = null;
  }

  /**
   * The FAQ label and the buttons under an answer. `rate`: a finished answer (labelled and
   * rated); a failed one only gets "Regenerate".
   */
  private addAnswerActions(view: MessageView, source: AnswerSource, rating: Rating | null, rate = true): void {
    view.showAnswerActions(
      source,
      rating,
      {
        onAskAssistant: () => {
          const id = view.messageId;
          if (id !== null) this.askAssistant(id);
        },
        onRate: (r) => {
          const id = view.messageId;
          if (id !== null) this.rate(id, r);
        },
        onRegenerate: () => {
          const id = view.messageId;
          if (id !== null) this.regenerate(id);
        },
      },
      rate,
    );
    this.updateAnswerControls();
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

  /**
   * "Busy" with a retry-after: the message (announced once: `#chat-alert` is `role="alert"`)
   * and the seconds left, counted down in a `role="timer"` span (not announced at each tick);
   * `data-retry-in` on the alert holds the seconds. Then the alert clears.
   */
  private showCountdown(message: string, seconds: number): void {
    this.showAlert(message);
    const alert = this.el.alert;
    const timer = this.doc.createElement("span");
    timer.className = "alert-countdown";
    timer.setAttribute("role", "timer");
    timer.setAttribute("aria-live", "off");
    alert.append(" ", timer);
    let left = Math.ceil(seconds);
    const render = () => {
      timer.textContent = `(${left} s)`;
      alert.dataset["retryIn"] = String(left);
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
    delete this.el.alert.dataset["retryIn"];
  }

  private updateUrl(conversationId: string): void {
    const path = `/c/${encodeURIComponent(conversationId)}/`;
    if (globalThis.location?.pathname !== path) history.replaceState(history.state, "", path);
  }

  /** Status change for a message this page is not streaming (e.g. one from the history). */
  private setStatusById(messageId: string, status: string): void {
    for (const view of this.views.values()) {
      if (view.messageId === messageId) view.setStatus(status);
    }
    this.updateAnswerControls();
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

/** The sidebar's `nav[aria-label="Conversations"]`, if the page has one. */
export function conversationNav(doc: Document): HTMLElement | null {
  const nav = doc.querySelector('nav[aria-label="Conversations"]');
  return nav instanceof HTMLElement ? nav : null;
}

/** The page's elements (`web/chat.html`); throws when one is missing. */
export function pageElements(doc: Document): ChatElements {
  return {
    log: required(doc, "chat-log", HTMLElement),
    form: required(doc, "chat-form", HTMLFormElement),
    input: required(doc, "chat-input", HTMLTextAreaElement),
    send: required(doc, "chat-send", HTMLButtonElement),
    stop: required(doc, "chat-stop", HTMLButtonElement),
    alert: required(doc, "chat-alert", HTMLElement),
    status: required(doc, "connection-status", HTMLElement),
    templates: templateElements(doc),
  };
}

export function start(doc: Document = document): ChatController {
  const el = pageElements(doc);
  const conv = readJsonScript(doc, "conversation-id");
  const conversationId = typeof conv === "string" && conv !== "" ? conv : null;
  const controller = new ChatController(el, conversationId);
  const nav = conversationNav(doc);
  if (nav !== null) {
    controller.attachConversations(new ConversationList(nav, conversationId), readJsonScript(doc, "conversations"), (url, init) => fetch(url, init));
    // Back to a tab (or back to a page from the back/forward cache): other tabs may have
    // started or continued conversations.
    doc.addEventListener("visibilitychange", () => {
      if (doc.visibilityState === "visible") controller.refreshConversations();
    });
    addEventListener("pageshow", (ev) => {
      if (ev.persisted) controller.refreshConversations();
    });
  }
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
