// The messages in `#chat-log`: every MessageView on the page, the questions (they have
// "Edit") and answers by id, the conversation's newest answer, the one open inline editor,
// and the buttons under the messages (which are usable when).

import { canAskAssistant, isRegenerable, showsRegenerate, showsSuggestions } from "./answers.ts";
import type { AnswerSource, Rating, SuggestedEntry } from "./protocol.ts";
import type { FrameScheduler } from "./stream.ts";
import { MessageView, type Role } from "./view.ts";

/** What the buttons under the messages ask for (by message id). */
export interface MessageActions {
  editQuestion(messageId: string): void;
  saveEdit(messageId: string, text: string): void;
  askAssistant(messageId: string): void;
  rate(messageId: string, rating: Rating): void;
  regenerate(messageId: string): void;
  /** A question offered under an answer ("Did you mean ...?"): ask it. */
  askSuggested(question: string): void;
}

export interface MessageLogOptions {
  scheduler: FrameScheduler;
  /** After each render of an answer's body. */
  onRender: (view: MessageView) => void;
  /** Something is sent, edited or streaming: the buttons under the messages wait. */
  isBusy: () => boolean;
  /** A person is asked for or holds the conversation: nothing wakes the assistant (the
   * server would refuse it), so what would ask it is hidden or off. */
  personInvolved?: () => boolean;
  actions: MessageActions;
}

export class MessageLog {
  /** Every message view on the page, by element. */
  private readonly views = new Map<HTMLElement, MessageView>();
  /** The assistant messages on the page, by id. */
  private readonly answers = new Map<string, MessageView>();
  private newestAnswer: string | null = null;
  /** The user messages on the page, by id. */
  private readonly questions = new Map<string, MessageView>();
  /** The question whose inline editor is open. */
  private editorView: MessageView | null = null;
  private readonly doc: Document;

  constructor(
    private readonly log: HTMLElement,
    private readonly options: MessageLogOptions,
  ) {
    this.doc = log.ownerDocument;
  }

  /** The conversation's newest answer on the page. */
  get newestAnswerId(): string | null {
    return this.newestAnswer;
  }

  /** Whether a message with this id is on the page. */
  has(messageId: string): boolean {
    for (const view of this.views.values()) if (view.messageId === messageId && view.element.isConnected) return true;
    return false;
  }

  /** The id of the last stored message on the page (null: none). */
  get lastMessageId(): string | null {
    let last: string | null = null;
    for (const el of this.log.querySelectorAll<HTMLElement>("[data-message-id]")) last = el.dataset["messageId"] ?? last;
    return last;
  }

  answer(messageId: string): MessageView | undefined {
    return this.answers.get(messageId);
  }

  question(messageId: string): MessageView | undefined {
    return this.questions.get(messageId);
  }

  /** A new message view (not yet on the page: `append` or `insertAfter` puts it there). */
  create(role: Role, status: string, messageId: string | null, content = "", sender: string | null = null): MessageView {
    const view = new MessageView(this.doc, role, status, messageId, content, {
      scheduler: this.options.scheduler,
      onRender: this.options.onRender,
      sender,
    });
    this.views.set(view.element, view);
    return view;
  }

  /** At the end of the log. */
  append(view: MessageView): void {
    this.log.appendChild(view.element);
  }

  /** Right under `before` (after its stats line and buttons). */
  insertAfter(before: MessageView, view: MessageView): void {
    const last = before.nodes.at(-1) ?? before.element;
    last.after(view.element);
  }

  /** An answer with an id: it is the conversation's newest. */
  addAnswer(view: MessageView): void {
    const id = view.messageId;
    if (id === null || id === "") return;
    this.answers.set(id, view);
    this.newestAnswer = id;
  }

  /** A stored question: it gets "Edit". */
  addQuestion(view: MessageView): void {
    const id = view.messageId;
    if (id === null || id === "") return;
    this.questions.set(id, view);
    view.showQuestionActions(() => {
      const current = view.messageId;
      if (current !== null) this.options.actions.editQuestion(current);
    });
    view.setEditEnabled(!this.options.isBusy() && !this.personInvolved());
  }

  /** The server stored question `view` as `messageId`. */
  renameQuestion(view: MessageView, messageId: string): void {
    if (view.messageId === messageId) return;
    const old = view.messageId;
    if (old !== null) this.questions.delete(old);
    view.messageId = messageId;
    this.addQuestion(view);
  }

  /** Remove every message after `view` from the page (`keep`, if given, stays). */
  removeAfter(view: MessageView, keep: MessageView | null): void {
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
    if (this.newestAnswer !== null && !this.answers.has(this.newestAnswer)) this.newestAnswer = null;
  }

  /** Open `view`'s inline editor with `text` (closing any other). */
  openEditor(view: MessageView, text: string): void {
    if (this.editorView !== null && this.editorView !== view) this.editorView.closeEditor();
    this.editorView = view;
    const input = view.openEditor(text, {
      onSave: (t) => {
        const id = view.messageId;
        if (id !== null) this.options.actions.saveEdit(id, t);
      },
      onCancel: () => {
        this.editorView = null;
        view.closeEditor(true);
      },
    });
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  }

  closeEditor(): void {
    this.editorView?.closeEditor();
    this.editorView = null;
  }

  /**
   * The FAQ label and the buttons under an answer. `rate`: a finished answer (labelled and
   * rated); a failed one only gets "Regenerate".
   */
  showAnswerActions(view: MessageView, source: AnswerSource, rating: Rating | null, rate = true): void {
    const actions = this.options.actions;
    view.showAnswerActions(
      source,
      rating,
      {
        onAskAssistant: () => {
          const id = view.messageId;
          if (id !== null) actions.askAssistant(id);
        },
        onRate: (r) => {
          const id = view.messageId;
          if (id !== null) actions.rate(id, r);
        },
        onRegenerate: () => {
          const id = view.messageId;
          if (id !== null) actions.regenerate(id);
        },
      },
      rate,
    );
    this.updateControls();
  }

  /**
   * The FAQ questions offered under an answer ("Did you mean ...?"), after its buttons;
   * shown under the newest answer while nothing is sent or streaming (updateControls).
   */
  showSuggestions(view: MessageView, entries: readonly SuggestedEntry[]): void {
    view.showSuggestions(entries, (question) => this.options.actions.askSuggested(question));
    this.updateControls();
  }

  /**
   * Under the answers: "Ask the assistant instead" and "Regenerate" on the newest answer only,
   * usable while nothing is sent or streaming; "Edit" on the questions, likewise; the
   * suggested questions under the newest answer only, hidden meanwhile.
   */
  updateControls(): void {
    const busy = this.options.isBusy();
    const held = this.personInvolved();
    const newestAnswerId = this.newestAnswer;
    for (const [messageId, view] of this.answers) {
      view.setAskEnabled(!held && canAskAssistant({ source: view.source, messageId, newestAnswerId, busy }));
      const shown = !held && showsRegenerate(messageId, newestAnswerId);
      view.setRegenerateState(shown, shown && !busy && isRegenerable(view.status));
      view.setSuggestionsShown(!held && showsSuggestions(messageId, newestAnswerId, busy));
    }
    for (const view of this.questions.values()) view.setEditEnabled(!busy && !held);
  }

  private personInvolved(): boolean {
    return this.options.personInvolved?.() ?? false;
  }

  /** Status change for a message this page is not streaming (e.g. one from the history). */
  setStatusById(messageId: string, status: string): void {
    for (const view of this.views.values()) {
      if (view.messageId === messageId) view.setStatus(status);
    }
    this.updateControls();
  }

  private forget(view: MessageView): void {
    this.views.delete(view.element);
    const id = view.messageId;
    if (id === null) return;
    if (this.answers.get(id) === view) this.answers.delete(id);
    if (this.questions.get(id) === view) this.questions.delete(id);
    if (this.editorView === view) this.editorView = null;
  }
}
