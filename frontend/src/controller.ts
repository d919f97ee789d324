// The chat page's controller: composes the pieces and turns the user's actions and the
// server's frames into calls on them.
//
//   connection.ts     Connection: frames out as JSON, reconnect detection, reply ids per connection
//   outbox.ts         Outbox: the chat.send / chat.regenerate / chat.edit awaiting chat.accepted
//   answerstream.ts   AnswerStream: the streaming answer (seq, gaps, resume, snapshot, stop, TTFT)
//   ttftreport.ts     TtftReports: chat.client_timing, once per answer
//   messagelog.ts     MessageLog: the message views, their ids, buttons and the inline editor
//   templatepicker.ts TemplatePicker: templates and the draft of a new conversation's first message
//   alerts.ts         AlertBanner: `#chat-alert` and the retry-after countdown
//   page.ts           the page's elements, the connection status, the address bar

import { canAskAssistant, isFinishedAnswer, isRegenerable, showsRegenerate } from "./answers.ts";
import { AlertBanner } from "./alerts.ts";
import { AnswerStream } from "./answerstream.ts";
import { AutoScroller } from "./autoscroll.ts";
import { Connection, type AwaitedReplies, type Transport } from "./connection.ts";
import { parseConversations, type ConversationList, type FetchJson } from "./conversations.ts";
import { DraftPrefill, type DraftTarget, type DraftTimers } from "./draftprefill.ts";
import { CANNOT_HELP_TEXT, HandoffBar, handoffElements, TYPING_EVERY_MS, type HandoffAction, type HandoffState } from "./handoff.ts";
import { newId } from "./ids.ts";
import { MessageLog } from "./messagelog.ts";
import { Outbox, type AwaitedRequest, type QueuedSend, type SentEdit, type SentRegenerate } from "./outbox.ts";
import { showConnectionState, showConversationUrl, type ChatElements } from "./page.ts";
import {
  contactFrame,
  feedbackFrame,
  handoffFrame,
  hasCode,
  parseServerFrame,
  sendFrame,
  stopFrame,
  syncFrame,
  typingFrame,
  type AcceptedFrame,
  type DoneFrame,
  type ErrorFrame,
  type HandoffStateFrame,
  type HumanMessageFrame,
  type Rating,
  type ResendFullFrame,
  type SendFrame,
} from "./protocol.ts";
import type { ConnectionState } from "./socket.ts";
import { defaultScheduler, type FrameScheduler } from "./stream.ts";
import { TemplatePicker, templatedSend } from "./templatepicker.ts";
import type { PromptTemplate, TemplateStore } from "./templates.ts";
import { TtftReports } from "./ttftreport.ts";
import { parseHistory, type MessageView } from "./view.ts";

export type { Transport } from "./connection.ts";

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
  /** The typing-prefill debounce's timers (default setTimeout). */
  draftTimers?: DraftTimers;
  /** Shows a new conversation's id (default: the address bar's `/c/<id>/`; the widget's
   * panel keeps no address). */
  showConversation?: (conversationId: string) => void;
}

export class ChatController {
  private readonly connection = new Connection();
  private readonly outbox: Outbox<MessageView>;
  private readonly stream: AnswerStream<MessageView>;
  private readonly ttft: TtftReports;
  private readonly drafts: DraftPrefill;
  /** chat.feedback frames waiting for chat.feedback_recorded. */
  private readonly ratingsSent: AwaitedReplies;
  private readonly messages: MessageLog;
  private readonly templates: TemplatePicker;
  private readonly alert: AlertBanner;
  private readonly scroller: AutoScroller;
  /** "Talk to a person" (null: the page has no bar), and who answers the conversation now. */
  private readonly handoffBar: HandoffBar | null;
  private handoffState: HandoffState = "bot";
  /** When chat.typing last went out (the person sees "typing…"). */
  private typingSentAt = -Infinity;
  private conversations: ConversationList | null = null;
  private fetchJson: FetchJson | null = null;
  /** Rendering the page's history: one scroll at the end instead of one per message. */
  private loadingHistory = false;
  /** A templated send is being prepared (patch + hash are computed asynchronously). */
  private preparing = false;
  private readonly now: () => number;
  private readonly reload: () => void;
  private readonly showConversation: (conversationId: string) => void;

  constructor(
    private readonly el: ChatElements,
    private conversationId: string | null,
    options: ControllerOptions = {},
  ) {
    this.now = options.now ?? (() => performance.now());
    this.reload = options.reload ?? (() => globalThis.location.reload());
    this.showConversation = options.showConversation ?? showConversationUrl;
    const send = this.connection.send.bind(this.connection);
    this.outbox = new Outbox(send, this.now);
    this.stream = new AnswerStream(this.now);
    this.ttft = new TtftReports(send, this.connection.awaitedReplies());
    this.drafts = new DraftPrefill(send, () => this.draftTarget(), options.draftTimers);
    this.ratingsSent = this.connection.awaitedReplies();
    this.scroller = new AutoScroller(el.log);
    this.alert = new AlertBanner(el.alert);
    this.messages = new MessageLog(el.log, {
      scheduler: options.scheduler ?? defaultScheduler(),
      onRender: (v) => this.onBodyRendered(v),
      isBusy: () => this.busy,
      personInvolved: () => this.handoffState === "waiting" || this.handoffState === "with_agent",
      actions: {
        editQuestion: (id) => this.startEdit(id),
        saveEdit: (id, text) => this.submitEdit(id, text),
        askAssistant: (id) => this.askAssistant(id),
        rate: (id, rating) => this.rate(id, rating),
        regenerate: (id) => this.regenerate(id),
        askSuggested: (question) => this.askSuggested(question),
      },
    });
    const handoffEls = handoffElements(el.log.ownerDocument);
    this.handoffBar =
      handoffEls === null
        ? null
        : new HandoffBar(
            handoffEls,
            (action) => this.askHandoff(action),
            (email) => this.leaveEmail(email),
          );
    this.handoffBar?.show("bot", "", conversationId !== null);
    this.templates = new TemplatePicker(el.templates, {
      input: el.input,
      isNewConversation: () => this.conversationId === null,
      isBusy: () => this.busy,
      showAlert: (message) => this.alert.show(message),
      draftChanged: () => this.drafts.typed(),
    });
  }

  attach(transport: Transport): void {
    this.connection.attach(transport);
    const { form, input, stop } = this.el;
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.submit();
    });
    input.addEventListener("input", () => {
      this.drafts.typed();
      this.typingShown();
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
    this.templates.attach(store);
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
      const view = this.messages.create(item.role, item.status, item.id, item.content, item.sender);
      this.messages.append(view);
      if (item.role === "agent") continue;
      if (item.role === "user") {
        this.messages.addQuestion(view);
        continue;
      }
      this.messages.addAnswer(view);
      if (isFinishedAnswer(item.status)) {
        this.messages.showAnswerActions(view, item.source, item.feedback);
        this.messages.showSuggestions(view, item.suggestions);
      } else if (item.status === "failed") this.messages.showAnswerActions(view, item.source, null, false);
      // Still being generated (the page was reloaded mid-answer): follow it from the
      // start once connected; the server replays what was said so far.
      else if (item.status === "streaming" && item.id !== null && this.stream.active === null) {
        view.restart();
        this.startStreaming(item.id, view, this.now(), false);
      }
    }
    this.loadingHistory = false;
    this.scroller.jumpToBottom();
    this.messages.updateControls();
  }

  // ---- connection ----

  onConnectionState(state: ConnectionState): void {
    showConnectionState(this.el.status, state);
  }

  onOpen(): void {
    const cutOff = this.outbox.request;
    // An edit cut off before chat.accepted: the server may or may not have applied it, and
    // sending it again would answer again. Show what the server has.
    if (cutOff?.kind === "edit") {
      this.reload();
      return;
    }
    // Titles or new conversations from other tabs, while we were away.
    if (this.connection.opened()) this.refreshConversations();
    // A send typed while offline, or cut off before chat.accepted, goes (again) now. The
    // server de-duplicates on the frame's id, so a repeat never starts a second answer.
    this.outbox.connectionOpened();
    // A regenerate cut off before chat.accepted is not resent (a second one would answer a
    // third time): follow the message instead; it shows the new answer if the server
    // started one, the old one otherwise.
    if (cutOff?.kind === "regenerate") {
      this.outbox.drop();
      cutOff.view.restart();
      this.startStreaming(cutOff.messageId, cutOff.view, cutOff.sentAt);
    }
    // The server kept generating while we were away: get the rest, from the last seq shown.
    const resume = this.stream.resume(newId());
    if (resume !== null) this.connection.send(resume);
    // Who answers the conversation, and what people wrote in it while we were away.
    if (this.conversationId !== null && this.handoffBar !== null) {
      this.connection.send(syncFrame(newId(), this.conversationId, this.messages.lastMessageId));
    }
  }

  onClose(): void {
    this.outbox.connectionLost();
    this.connection.closed(); // replies to ratings and timing reports cannot come any more
    this.stream.connectionLost();
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
      case "chat.started":
        if (this.stream.streaming(frame.message_id) !== null) this.messages.answer(frame.message_id)?.setStage("prefilling");
        return;
      case "chat.delta":
        this.messages.answer(frame.message_id)?.setStage(null);
        return this.stream.onDelta(frame);
      case "chat.done":
        return this.onDone(frame);
      case "chat.snapshot":
        return this.stream.onSnapshot(frame);
      case "chat.feedback_recorded":
        this.ratingsSent.settle(frame.id);
        this.messages.answer(frame.message_id)?.setRating(frame.rating);
        if (frame.rating === "down") this.handoffBar?.offer(); // the bot offers a person
        return;
      case "chat.error":
        return this.onError(frame);
      case "chat.resend_full":
        return this.onResendFull(frame);
      case "templates.changed":
        this.templates.changed(frame.etag);
        return;
      case "chat.handoff_state":
        return this.onHandoffState(frame);
      case "chat.human":
        return this.onHuman(frame);
      case "chat.agent_typing":
        if (frame.conversation_id === this.conversationId) this.handoffBar?.showTyping(frame.agent);
        return;
    }
  }

  // ---- user actions ----

  get busy(): boolean {
    return this.preparing || this.outbox.request !== null || this.stream.active !== null;
  }

  /** Whether the log follows the streaming answer (the user has not scrolled up). */
  get followingStream(): boolean {
    return this.scroller.following;
  }

  submit(): void {
    if (this.busy) return;
    const template = this.templates.selected;
    if (template !== null) {
      void this.submitTemplated(template);
      return;
    }
    const text = this.el.input.value;
    if (text.trim() === "") return;
    this.alert.clear();
    this.startSend(sendFrame(newId(), this.conversationId, text), text);
  }

  /**
   * A question offered under the newest answer ("Did you mean ...?"): sent as the next
   * message, as if typed (the textbox keeps what is in it). The server answers it from that
   * FAQ entry at once.
   */
  askSuggested(question: string): void {
    if (this.busy) return;
    this.alert.clear();
    this.startSend(sendFrame(newId(), this.conversationId, question), question);
    this.el.input.focus(); // the clicked button hides while the answer streams
  }

  /** What a typing prefill would be sent for now (null: nothing while an answer streams). */
  private draftTarget(): DraftTarget | null {
    if (this.busy) return null;
    const template = this.templates.selected;
    if (template === null) return { conversationId: this.conversationId, template: null, text: this.el.input.value };
    const message = this.templates.draftMessage(template);
    return message === null ? null : { conversationId: null, template, text: message.text };
  }

  /** The first message of a new conversation, from the selected template. */
  private async submitTemplated(template: PromptTemplate): Promise<void> {
    const message = this.templates.message(template);
    if (message === null) return;
    this.alert.clear();
    const id = newId();
    this.preparing = true;
    this.updateControls();
    let frame: SendFrame;
    try {
      frame = await templatedSend(id, message);
    } finally {
      this.preparing = false;
    }
    this.startSend(frame, message.text);
  }

  private startSend(frame: SendFrame, fullText: string): void {
    this.drafts.reset();
    this.messages.closeEditor();
    const user = this.messages.create("user", "pending", null, fullText);
    this.messages.append(user);
    this.scroller.jumpToBottom();
    this.outbox.queueSend(frame, fullText, user);
    this.updateControls();
  }

  requestStop(): void {
    const a = this.stream.active;
    if (a === null || a.stopping) return;
    const id = newId();
    if (!this.connection.send(stopFrame(id, a.messageId))) {
      this.alert.show("Not connected: could not stop the answer.");
      return;
    }
    a.stopSent(id);
    this.updateControls();
  }

  /**
   * "Ask the assistant instead" under a FAQ answer: answer the same question again with the
   * model, into the same message. Only the conversation's newest answer, and only while
   * nothing is sent or streaming (the button is disabled otherwise).
   */
  askAssistant(messageId: string): void {
    const view = this.messages.answer(messageId);
    if (view === undefined) return;
    if (!canAskAssistant({ source: view.source, messageId, newestAnswerId: this.messages.newestAnswerId, busy: this.busy })) return;
    this.startRegenerate(view, messageId, true);
  }

  /** "Regenerate" under the newest answer: answer the same question again (FAQ first, as for a send). */
  regenerate(messageId: string): void {
    const view = this.messages.answer(messageId);
    if (view === undefined || this.busy || !showsRegenerate(messageId, this.messages.newestAnswerId) || !isRegenerable(view.status)) return;
    this.startRegenerate(view, messageId, false);
  }

  private startRegenerate(view: MessageView, messageId: string, bypassFaq: boolean): void {
    if (!this.outbox.sendRegenerate(messageId, bypassFaq, view)) {
      this.alert.show(bypassFaq ? "Not connected: could not ask the assistant." : "Not connected: could not regenerate the answer.");
      return;
    }
    this.alert.clear();
    this.messages.closeEditor();
    view.setActionsEnabled(false);
    this.updateControls();
  }

  /** "Edit" under a question: open its inline editor with its text. */
  startEdit(messageId: string): void {
    const view = this.messages.question(messageId);
    if (view === undefined || this.busy) return;
    this.messages.openEditor(view, view.text);
  }

  /**
   * Save an edited question: `chat.edit`. The question shows the new text (pending) until
   * `chat.accepted`; then every later message is removed and the answer streams again.
   */
  submitEdit(messageId: string, text: string): void {
    const view = this.messages.question(messageId);
    if (view === undefined || this.busy) return;
    if (text.trim() === "") {
      this.alert.show("The question cannot be empty.");
      return;
    }
    if (!this.outbox.sendEdit(messageId, text, view, view.text)) {
      this.alert.show("Not connected: could not send the edited question.");
      return;
    }
    this.alert.clear();
    this.messages.closeEditor();
    view.setText(text);
    view.setStatus("pending");
    this.updateControls();
  }

  /** While a person is asked for or holds the conversation, they see the customer typing. */
  private typingShown(): void {
    if (this.conversationId === null || (this.handoffState !== "waiting" && this.handoffState !== "with_agent")) return;
    const now = this.now();
    if (now - this.typingSentAt < TYPING_EVERY_MS) return;
    this.typingSentAt = now;
    this.connection.send(typingFrame(newId(), this.conversationId));
  }

  /** "Talk to a person" / "Stop waiting": the server answers with chat.handoff_state. */
  askHandoff(action: HandoffAction): void {
    if (this.conversationId === null) return;
    const offered = action === "request" && this.handoffBar?.offered === true;
    if (!this.connection.send(handoffFrame(newId(), this.conversationId, action, offered))) {
      this.alert.show("Not connected: could not reach the team. Try again in a moment.");
    }
  }

  /** While nobody of the team is online: where to write back (chat.handoff contact). */
  leaveEmail(email: string): void {
    if (this.conversationId === null) return;
    if (!this.connection.send(contactFrame(newId(), this.conversationId, email))) {
      this.alert.show("Not connected: your email address was not sent. Try again in a moment.");
    }
  }

  /** Thumbs up/down: marked as pressed once the server answers chat.feedback_recorded. */
  rate(messageId: string, rating: Rating): void {
    const id = newId();
    if (!this.connection.send(feedbackFrame(id, messageId, rating))) {
      this.alert.show("Not connected: could not send your rating.");
      return;
    }
    this.ratingsSent.add(id);
  }

  // ---- server frames ----

  private onAccepted(f: AcceptedFrame): void {
    const r = this.outbox.settle(f.id);
    if (r === null) return;
    switch (r.kind) {
      case "regenerate":
        return this.onRegenerateAccepted(r, f);
      case "edit":
        return this.onEditAccepted(r, f);
      case "send":
        return this.onSendAccepted(r, f);
    }
  }

  /** The question is stored: it gets its id, and its answer streams under it. */
  private onSendAccepted(p: QueuedSend<MessageView>, f: AcceptedFrame): void {
    const isNew = this.conversationId === null;
    this.conversationId = f.conversation_id;
    if (isNew) this.handoffBar?.show(this.handoffState, "", true);
    this.showConversation(f.conversation_id);
    this.conversations?.touch(f.conversation_id, isNew ? p.fullText : null);
    if (this.el.input.value === p.fullText) this.el.input.value = "";
    this.templates.close();
    p.user.messageId = f.user_message_id;
    p.user.setStatus("complete");
    this.messages.addQuestion(p.user);
    const view = this.messages.create("assistant", "streaming", f.assistant_message_id);
    this.messages.append(view);
    this.scroller.contentChanged();
    this.messages.addAnswer(view);
    this.startStreaming(f.assistant_message_id, view, p.sentAt);
  }

  /** The edit is stored: later messages go, the answer streams again right under the question. */
  private onEditAccepted(e: SentEdit<MessageView>, f: AcceptedFrame): void {
    const question = e.view;
    question.setStatus("complete");
    this.messages.renameQuestion(question, f.user_message_id);
    let answer = this.messages.answer(f.assistant_message_id) ?? null;
    answer?.restart();
    this.messages.removeAfter(question, answer);
    if (answer === null) {
      answer = this.messages.create("assistant", "streaming", f.assistant_message_id);
      this.messages.insertAfter(question, answer);
    }
    this.messages.addAnswer(answer);
    this.conversations?.touch(f.conversation_id, null);
    this.scroller.jumpToBottom();
    this.startStreaming(f.assistant_message_id, answer, e.sentAt);
  }

  /** The server restarted the answer: stream the new one into the same message element. */
  private onRegenerateAccepted(r: SentRegenerate<MessageView>, f: AcceptedFrame): void {
    const view = this.messages.answer(f.assistant_message_id) ?? r.view;
    view.restart();
    this.startStreaming(f.assistant_message_id, view, r.sentAt);
  }

  private onHandoffState(f: HandoffStateFrame): void {
    if (f.conversation_id !== this.conversationId) return;
    this.handoffState = f.state;
    this.handoffBar?.show(f.state, f.notice, true, { nobodyOnline: f.nobody_online, contactEmail: f.contact_email });
    this.updateControls(); // Regenerate and Edit wake the assistant: not while a person is involved
  }

  /**
   * A message written while a person is asked for or holds the conversation: ours (the send
   * it answers is stored; nobody streams an answer) or the person's, or one from our other
   * tab. Each message id is shown once.
   */
  private onHuman(f: HumanMessageFrame): void {
    if (f.conversation_id !== this.conversationId) return;
    const sent = f.id === null ? null : this.outbox.settle(f.id);
    if (sent !== null && sent.kind === "send") {
      if (this.el.input.value === sent.fullText) this.el.input.value = "";
      sent.user.messageId = f.message.id;
      sent.user.setStatus("complete");
      this.scroller.contentChanged();
      this.updateControls();
      return;
    }
    if (f.message.role === "agent") this.handoffBar?.typingDone();
    if (this.messages.has(f.message.id) || f.message.role === "assistant") return;
    const view = this.messages.create(f.message.role, "complete", f.message.id, f.message.content, f.message.sender);
    this.messages.append(view);
    this.scroller.contentChanged();
  }

  private startStreaming(messageId: string, view: MessageView, sentAt: number, measured = true): void {
    this.stream.start(messageId, view, sentAt, measured);
    // accepted: stored and in the queue (a followed answer's stage is not known)
    view.setStage(measured ? "queued" : null);
    this.updateControls();
  }

  /** An answer's body was rendered (in an animation frame, or flushed at its end). */
  private onBodyRendered(view: MessageView): void {
    // The frame callback runs right before the browser paints the first token.
    const firstPaint = this.stream.painted(view);
    if (firstPaint !== null) this.ttft.report(firstPaint);
    if (!this.loadingHistory) this.scroller.contentChanged();
  }

  private onDone(f: DoneFrame): void {
    const a = this.stream.streaming(f.message_id);
    if (a === null) {
      const view = this.messages.answer(f.message_id);
      const regenerating = this.outbox.request;
      if (view === undefined || (regenerating?.kind === "regenerate" && regenerating.view === view)) {
        this.messages.setStatusById(f.message_id, f.status);
        return;
      }
      view.flush();
      view.setStatus(f.status);
      this.messages.showAnswerActions(view, f.source, view.rating);
      this.messages.showSuggestions(view, f.suggested_entries);
      return;
    }
    a.view.flush();
    this.ttft.report(a);
    this.stream.end();
    a.view.setStatus(f.status);
    a.showStats(f);
    this.messages.showAnswerActions(a.view, f.source, null);
    this.messages.showSuggestions(a.view, f.suggested_entries);
    if (f.offer_person) this.handoffBar?.offer(CANNOT_HELP_TEXT); // the bot offers a person
    this.updateControls();
    // The stats line and the buttons are part of the answer: keep them in view.
    this.scroller.contentChanged();
    this.el.input.focus();
  }

  private onError(f: ErrorFrame): void {
    // A refused timing report (e.g. already reported from another tab) changes nothing shown.
    if (this.ttft.isRefusal(f.id)) {
      console.warn(`chat: timing report refused: ${f.code} ${f.message}`);
      return;
    }
    this.alert.showError(f);
    // Answers to a rating or a regenerate first: their message_id may be the answer that
    // streams now, which they must not mark failed.
    if (this.ratingsSent.settle(f.id)) return;
    const refused = this.outbox.settle(f.id);
    if (refused !== null) return this.onRefused(refused, f);
    const a = this.stream.active;
    if (a !== null && f.message_id === a.messageId && !a.isStopFrame(f.id)) {
      a.view.flush();
      this.stream.end();
      a.view.setStatus("failed");
      a.view.setMeta("failed");
      this.messages.showAnswerActions(a.view, a.view.source, null, false);
      this.updateControls();
      this.scroller.contentChanged();
      return;
    }
    if (a !== null && a.isStopFrame(f.id)) {
      a.stopCancelled(); // the stop was refused; allow another try
      this.updateControls();
      return;
    }
    if (f.message_id !== null && hasCode(f, "engine")) this.messages.setStatusById(f.message_id, "failed");
  }

  /** The server did not accept the request: nothing changed there. */
  private onRefused(r: AwaitedRequest<MessageView>, f: ErrorFrame): void {
    switch (r.kind) {
      case "regenerate":
        // The answer stays as it was.
        r.view.setActionsEnabled(true);
        this.updateControls();
        return;
      case "edit":
        // The question shows its old text again and the editor reopens with the edited one.
        r.view.setText(r.oldText);
        r.view.setStatus("complete");
        this.updateControls();
        this.messages.openEditor(r.view, r.text);
        return;
      case "send": {
        // Drop the bubble, keep the typed text in the textbox.
        r.user.remove();
        this.updateControls();
        this.el.input.focus();
        const template = r.frame.template;
        if (hasCode(f, "template_unknown") && template !== undefined && template !== null) void this.templates.afterTemplateUnknown(template.id);
        return;
      }
    }
  }

  /**
   * The server could not rebuild the templated text exactly: the outbox resends the same
   * frame with the full text, once. A second request means the server cannot take it; the
   * text stays in the textbox.
   */
  private onResendFull(f: ResendFullFrame): void {
    const outcome = this.outbox.resendFull(f.id);
    if (outcome?.kind !== "given-up") return;
    outcome.send.user.remove();
    this.alert.show("The message could not be sent from the template. Your text is kept: send it again, or choose “No template”.");
    this.updateControls();
    this.el.input.focus();
  }

  // ---- helpers ----

  private updateControls(): void {
    this.el.send.disabled = this.busy;
    const a = this.stream.active;
    this.el.stop.disabled = a === null || a.stopping;
    this.messages.updateControls();
  }
}
