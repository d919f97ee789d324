// DOM helpers for one chat message. User text goes in through text nodes only (never
// innerHTML); an answer's markdown is rendered by MarkdownBody (src/stream.ts), which puts
// only sanitized nodes in the page (src/markdown.ts).

import { ASK_ASSISTANT_LABEL, EDIT_LABEL, FAQ_LABEL_TEXT, pressedStates, RATING_BUTTONS, REGENERATE_LABEL, SUGGESTIONS_LABEL } from "./answers.ts";
import { parseRating, parseSource, parseSuggestedEntries, type AnswerSource, type Rating, type SuggestedEntry } from "./protocol.ts";
import { MarkdownBody, type FrameScheduler } from "./stream.ts";

/** A question, the assistant's answer, or a person's message (docs/handoff.md). */
export type Role = "user" | "assistant" | "agent";
/** The documented statuses, plus "pending" for a user message the server has not accepted yet. */
export type ViewStatus = "pending" | "streaming" | "complete" | "stopped" | "failed";
export type AnswerStage = "queued" | "prefilling";

/** What the buttons under an answer do. */
export interface AnswerActionHandlers {
  onAskAssistant(): void;
  onRate(rating: Rating): void;
  onRegenerate(): void;
}

export interface MessageViewOptions {
  /** When an answer's streamed text is rendered (default: requestAnimationFrame). */
  scheduler?: FrameScheduler;
  /** After each render of an answer's body. */
  onRender?: (view: MessageView) => void;
  /** A person's message: their first name, shown above it. */
  sender?: string | null;
}

/** The inline editor of a user message (edit-and-resend). */
export interface EditorHandlers {
  onSave(text: string): void;
  onCancel(): void;
}

/** Accessible names in the inline editor (none contains "Message", "Send" or "Stop"). */
export const EDITOR_LABEL = "Edit question";
export const EDITOR_SAVE_LABEL = "Save";
export const EDITOR_CANCEL_LABEL = "Cancel";

export class MessageView {
  readonly element: HTMLElement;
  /** `.message-body`: the message's content and nothing else. */
  readonly body: HTMLElement;
  /** The markdown renderer of an answer; null for a user message (plain text). */
  private readonly markdown: MarkdownBody | null;
  private userText = "";
  private meta: HTMLElement | null = null;
  /** The row under the message: for an answer the FAQ label and its buttons; for a question "Edit". */
  private actions: HTMLElement | null = null;
  private askButton: HTMLButtonElement | null = null;
  private regenerateButton: HTMLButtonElement | null = null;
  private editButton: HTMLButtonElement | null = null;
  private rateButtons: [Rating, HTMLButtonElement][] = [];
  private currentRating: Rating | null = null;
  private editor: HTMLFormElement | null = null;
  /** Under a model answer the FAQ was unsure about: "Did you mean:" and a button per entry. */
  private suggestions: HTMLElement | null = null;

  constructor(doc: Document, role: Role, status: ViewStatus | (string & {}), messageId: string | null, content = "", options: MessageViewOptions = {}) {
    const el = doc.createElement("div");
    el.className = `message message-${role}`;
    el.dataset["role"] = role;
    if (messageId !== null) el.dataset["messageId"] = messageId;
    if (role === "agent") el.dataset["sender"] = options.sender ?? "Agent"; // the label (chat.css)
    const body = doc.createElement("div");
    body.className = "message-body";
    el.appendChild(body);
    this.element = el;
    this.body = body;
    const onRender = options.onRender;
    this.markdown = role === "assistant" ? new MarkdownBody(body, options.scheduler, onRender ? () => onRender(this) : null) : null;
    this.setStatus(status);
    if (content !== "") {
      this.append(content);
      this.flush();
    }
  }

  get role(): Role {
    const role = this.element.dataset["role"];
    return role === "assistant" || role === "agent" ? role : "user";
  }

  get messageId(): string | null {
    return this.element.dataset["messageId"] ?? null;
  }

  set messageId(id: string | null) {
    if (id === null) delete this.element.dataset["messageId"];
    else this.element.dataset["messageId"] = id;
    for (const n of [this.meta, this.actions, this.suggestions]) {
      if (n === null) continue;
      if (id === null) delete n.dataset["for"];
      else n.dataset["for"] = id;
    }
  }

  get status(): string {
    return this.element.dataset["status"] ?? "";
  }

  setStatus(status: ViewStatus | (string & {})): void {
    setMessageStatus(this.element, status);
  }

  /**
   * Where an answer that shows nothing yet is, from the server's frames: "queued" after
   * `chat.accepted`, "prefilling" after `chat.started` (a worker reads the question), null
   * once text arrives. The stylesheet says so in the empty body if the wait lasts.
   */
  setStage(stage: AnswerStage | null): void {
    if (stage === null) {
      if (this.element.dataset["stage"] !== undefined) delete this.element.dataset["stage"];
    } else this.element.dataset["stage"] = stage;
  }

  /** The message's text as sent or received (an answer's markdown source). */
  get text(): string {
    return this.markdown?.text ?? this.userText;
  }

  /**
   * Append text. A user message extends its one text node; an answer shows the delta at the
   * next animation frame, together with the others that arrive until then.
   */
  append(text: string): void {
    if (text === "") return;
    if (this.markdown !== null) {
      this.markdown.append(text);
      return;
    }
    this.userText += text;
    const last = this.body.lastChild;
    if (last !== null && last.nodeType === 3) (last as Text).appendData(text);
    else this.body.appendChild(this.element.ownerDocument.createTextNode(text));
  }

  /** Replace the whole text (a snapshot of an answer, an edited question). */
  setText(text: string): void {
    if (this.markdown !== null) {
      this.markdown.set(text);
      return;
    }
    this.userText = text;
    this.body.textContent = text;
  }

  /** Render now what waits for the next frame. */
  flush(): void {
    this.markdown?.flush();
  }

  /** The streaming renderer's counters (null for a user message). */
  get renderStats(): { renders: number; blocksRendered: number } | null {
    return this.markdown?.stats ?? null;
  }

  /**
   * The small muted line under the message. It is a sibling of the message element (not a
   * child), so the message element holds only the message.
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

  /** "faq" or "model" once the answer is finished (`data-source`); "model" before. */
  get source(): AnswerSource {
    return parseSource(this.element.dataset["source"]);
  }

  get rating(): Rating | null {
    return this.currentRating;
  }

  /**
   * The row of controls under an answer (a sibling, like the stats line): for a finished
   * answer (`rate`) it is labelled with its source (`data-source` on the message element);
   * for a FAQ answer the "From FAQ" label (`.faq-label`) and "Ask the assistant instead";
   * then "Regenerate" (shown on the newest answer only, see setRegenerateState) and, when
   * `rate`, "Good answer" / "Bad answer". Replaces an earlier row.
   */
  showAnswerActions(source: AnswerSource, rating: Rating | null, handlers: AnswerActionHandlers, rate = true): void {
    this.removeActions();
    const doc = this.element.ownerDocument;
    const id = this.messageId;
    if (rate) this.element.dataset["source"] = source;
    const row = this.newActionRow("Answer actions");
    if (rate && source === "faq") {
      const label = doc.createElement("span");
      label.className = "faq-label";
      label.textContent = FAQ_LABEL_TEXT;
      if (id !== null) {
        label.id = `faq-label-${id}`;
        this.element.setAttribute("aria-describedby", label.id);
      }
      const ask = actionButton(doc, "ask-assistant", ASK_ASSISTANT_LABEL, () => handlers.onAskAssistant());
      row.append(label, ask);
      this.askButton = ask;
    }
    const regenerate = actionButton(doc, "regenerate", REGENERATE_LABEL, () => handlers.onRegenerate());
    regenerate.hidden = true;
    row.appendChild(regenerate);
    this.regenerateButton = regenerate;
    if (rate) {
      for (const { rating: r, text, label } of RATING_BUTTONS) {
        const b = actionButton(doc, `rate rate-${r}`, text, () => handlers.onRate(r));
        b.title = label;
        b.setAttribute("aria-label", label);
        b.dataset["rating"] = r;
        row.appendChild(b);
        this.rateButtons.push([r, b]);
      }
    }
    (this.meta ?? this.element).after(row);
    this.actions = row;
    this.setRating(rating);
  }

  /** "Edit" under a question (edit-and-resend). Replaces an earlier row. */
  showQuestionActions(onEdit: () => void): void {
    this.removeActions();
    const row = this.newActionRow("Question actions");
    const edit = actionButton(this.element.ownerDocument, "edit", EDIT_LABEL, onEdit);
    row.appendChild(edit);
    (this.meta ?? this.element).after(row);
    this.actions = row;
    this.editButton = edit;
  }

  /**
   * The FAQ questions the answer's question may have meant, after the action row
   * (`.suggested-questions`, `role="group"` "Did you mean"): "Did you mean:" and one button
   * per entry with its question (text only); a click calls `onPick` with it. None: no row.
   * Replaces an earlier row.
   */
  showSuggestions(entries: readonly SuggestedEntry[], onPick: (question: string) => void): void {
    this.removeSuggestions();
    if (entries.length === 0) return;
    const doc = this.element.ownerDocument;
    const row = doc.createElement("div");
    row.className = "suggested-questions";
    row.setAttribute("role", "group");
    row.setAttribute("aria-label", "Did you mean");
    const id = this.messageId;
    if (id !== null) row.dataset["for"] = id;
    const label = doc.createElement("span");
    label.className = "suggested-questions-label";
    label.textContent = SUGGESTIONS_LABEL;
    row.appendChild(label);
    for (const { entry_id, question } of entries) {
      const b = doc.createElement("button");
      b.type = "button";
      b.className = "suggested-question secondary";
      b.textContent = question;
      b.dataset["entryId"] = String(entry_id);
      b.addEventListener("click", () => onPick(question));
      row.appendChild(b);
    }
    (this.actions ?? this.meta ?? this.element).after(row);
    this.suggestions = row;
  }

  /** Show or hide the suggested questions (no-op without any). */
  setSuggestionsShown(shown: boolean): void {
    if (this.suggestions !== null) this.suggestions.hidden = !shown;
  }

  /** Mark the recorded rating: `aria-pressed="true"` on its button, "false" on the other. */
  setRating(rating: Rating | null): void {
    this.currentRating = rating;
    const pressed = pressedStates(rating);
    for (const [r, b] of this.rateButtons) b.setAttribute("aria-pressed", pressed[r]);
  }

  /** Enable or disable "Ask the assistant instead" (no-op without one). */
  setAskEnabled(enabled: boolean): void {
    if (this.askButton !== null) this.askButton.disabled = !enabled;
  }

  /** "Regenerate" is shown under the newest answer only, enabled while nothing else runs. */
  setRegenerateState(visible: boolean, enabled: boolean): void {
    const b = this.regenerateButton;
    if (b === null) return;
    b.hidden = !visible;
    b.disabled = !enabled;
  }

  /** Enable or disable "Edit" (no-op without one). */
  setEditEnabled(enabled: boolean): void {
    if (this.editButton !== null) this.editButton.disabled = !enabled;
  }

  /** Disable every button under the answer (e.g. while it is being asked again). */
  setActionsEnabled(enabled: boolean): void {
    for (const [, b] of this.rateButtons) b.disabled = !enabled;
    if (!enabled) {
      this.setAskEnabled(false);
      if (this.regenerateButton !== null) this.regenerateButton.disabled = true;
    }
  }

  get editing(): boolean {
    return this.editor !== null;
  }

  /**
   * Edit a question in place: the body is hidden and a form takes its place, with a textbox
   * ("Edit question"; Enter saves, Shift+Enter is a new line, Escape cancels), "Save" and
   * "Cancel". The handlers decide when to close it (closeEditor).
   */
  openEditor(text: string, handlers: EditorHandlers): HTMLTextAreaElement {
    this.closeEditor();
    const doc = this.element.ownerDocument;
    const form = doc.createElement("form");
    form.className = "message-editor";
    form.noValidate = true;
    const input = doc.createElement("textarea");
    input.className = "message-editor-input";
    input.setAttribute("aria-label", EDITOR_LABEL);
    input.rows = Math.min(10, Math.max(2, text.split("\n").length));
    input.value = text;
    const save = doc.createElement("button");
    save.type = "submit";
    save.className = "message-editor-save";
    save.textContent = EDITOR_SAVE_LABEL;
    save.title = "Replace the question and get a new answer; later messages are removed";
    const cancel = doc.createElement("button");
    cancel.type = "button";
    cancel.className = "secondary message-editor-cancel";
    cancel.textContent = EDITOR_CANCEL_LABEL;
    const buttons = doc.createElement("div");
    buttons.className = "message-editor-actions";
    buttons.append(save, cancel);
    form.append(input, buttons);
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      handlers.onSave(input.value);
    });
    input.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape") {
        ev.preventDefault();
        handlers.onCancel();
      } else if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing && ev.keyCode !== 229) {
        ev.preventDefault();
        handlers.onSave(input.value);
      }
    });
    cancel.addEventListener("click", () => handlers.onCancel());
    this.body.hidden = true;
    this.element.appendChild(form);
    this.element.classList.add("message-editing");
    this.editor = form;
    if (this.actions !== null) this.actions.hidden = true;
    return input;
  }

  /** Close the editor (if open) and show the body again; focus goes back to "Edit" when asked. */
  closeEditor(focusEdit = false): void {
    if (this.editor === null) return;
    this.editor.remove();
    this.editor = null;
    this.body.hidden = false;
    this.element.classList.remove("message-editing");
    if (this.actions !== null) this.actions.hidden = false;
    if (focusEdit) this.editButton?.focus();
  }

  /**
   * The answer is generated again into this message (`chat.accepted` of a regenerate or an
   * edit): empty it, drop its label, buttons and stats line, and mark it streaming.
   */
  restart(): void {
    this.removeActions();
    this.removeSuggestions();
    this.meta?.remove();
    this.meta = null;
    if (this.markdown !== null) this.markdown.clear();
    else {
      this.userText = "";
      this.body.replaceChildren();
    }
    delete this.element.dataset["source"];
    this.element.removeAttribute("aria-describedby");
    this.setStatus("streaming");
  }

  /** The message's nodes in the log: the element, then its stats line and action row. */
  get nodes(): HTMLElement[] {
    return [this.element, this.meta, this.actions, this.suggestions].filter((n): n is HTMLElement => n !== null);
  }

  remove(): void {
    this.removeActions();
    this.removeSuggestions();
    this.closeEditor();
    this.meta?.remove();
    this.element.remove();
  }

  private newActionRow(label: string): HTMLElement {
    const row = this.element.ownerDocument.createElement("div");
    row.className = `message-actions message-actions-${this.role}`;
    row.setAttribute("role", "group");
    row.setAttribute("aria-label", label);
    const id = this.messageId;
    if (id !== null) row.dataset["for"] = id;
    return row;
  }

  private removeSuggestions(): void {
    this.suggestions?.remove();
    this.suggestions = null;
  }

  private removeActions(): void {
    this.actions?.remove();
    this.actions = null;
    this.askButton = null;
    this.regenerateButton = null;
    this.editButton = null;
    this.rateButtons = [];
    this.currentRating = null;
  }
}

function actionButton(doc: Document, cls: string, text: string, onClick: () => void): HTMLButtonElement {
  const b = doc.createElement("button");
  b.type = "button";
  b.className = `message-action ${cls}`;
  b.textContent = text;
  b.addEventListener("click", onClick);
  return b;
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
  /** "model" when the item has no `source`. */
  source: AnswerSource;
  /** The stored rating (`feedback`: "up"/"down"; absent or "" = none). */
  feedback: Rating | null;
  /** FAQ questions offered under a model answer ("Did you mean ...?"); none when absent. */
  suggestions: SuggestedEntry[];
  /** A person's message: their first name. */
  sender: string | null;
}

/** Validate the server-rendered history; skips malformed entries. */
export function parseHistory(data: unknown): HistoryItem[] {
  if (!Array.isArray(data)) return [];
  const out: HistoryItem[] = [];
  for (const item of data as unknown[]) {
    if (typeof item !== "object" || item === null) continue;
    const o = item as Record<string, unknown>;
    const role = o["role"];
    if (role !== "user" && role !== "assistant" && role !== "agent") continue;
    out.push({
      id: typeof o["id"] === "string" ? o["id"] : String(o["id"] ?? ""),
      role,
      content: typeof o["content"] === "string" ? o["content"] : "",
      status: typeof o["status"] === "string" && o["status"] !== "" ? o["status"] : "complete",
      source: parseSource(o["source"]),
      feedback: parseRating(o["feedback"]),
      suggestions: parseSuggestedEntries(o["suggested_entries"]),
      sender: typeof o["sender"] === "string" ? o["sender"] : null,
    });
  }
  return out;
}

// ---- template picker (chat.html: #template-select, #template-variables) ----
// Template names, labels and choices are admin-written text: textContent only.

/** The part of a template the picker shows. */
export interface TemplateOption {
  id: number;
  name: string;
  description: string;
}

export interface TemplateFieldSpec {
  name: string;
  label: string;
  type: "string" | "integer" | "choice";
  required: boolean;
  choices: readonly string[];
}

/**
 * Rebuild the `<select>` options: "No template" (value ""), then one per template (value =
 * its id). `extra` is a template no longer in the list that is still selected.
 */
export function renderTemplateOptions(select: HTMLSelectElement, templates: readonly TemplateOption[], selectedId: number | null, extra: TemplateOption | null = null): void {
  const doc = select.ownerDocument;
  const none = doc.createElement("option");
  none.value = "";
  none.textContent = "No template";
  const options = [none];
  const all = extra !== null && !templates.some((t) => t.id === extra.id) ? [...templates, { ...extra, name: `${extra.name} (no longer offered)` }] : templates;
  for (const t of all) {
    const o = doc.createElement("option");
    o.value = String(t.id);
    o.textContent = t.name;
    if (t.description !== "") o.title = t.description;
    options.push(o);
  }
  select.replaceChildren(...options);
  select.value = selectedId === null ? "" : String(selectedId);
  if (select.selectedIndex < 0) select.selectedIndex = 0;
}

/** The selected template id, or null for "No template". */
export function selectedTemplateId(select: HTMLSelectElement): number | null {
  const v = select.value;
  if (v === "") return null;
  const n = Number(v);
  return Number.isInteger(n) ? n : null;
}

/**
 * One labelled input per variable: `<select>` for choice variables (first option empty),
 * `type=number` for integers, text otherwise. `values` (by variable name) are filled in,
 * so switching to a new version of the same template keeps what was typed.
 */
export function renderVariableFields(container: HTMLElement, fields: readonly TemplateFieldSpec[], values: Readonly<Record<string, string>> = {}): void {
  const doc = container.ownerDocument;
  const nodes: HTMLElement[] = [];
  fields.forEach((f, i) => {
    const id = `template-var-${i}`;
    const wrap = doc.createElement("div");
    wrap.className = "template-field";
    const label = doc.createElement("label");
    label.htmlFor = id;
    label.textContent = f.label;
    let input: HTMLInputElement | HTMLSelectElement;
    if (f.type === "choice") {
      const sel = doc.createElement("select");
      const empty = doc.createElement("option");
      empty.value = "";
      empty.textContent = f.required ? "Choose…" : "—";
      sel.appendChild(empty);
      for (const c of f.choices) {
        const o = doc.createElement("option");
        o.value = c;
        o.textContent = c;
        sel.appendChild(o);
      }
      input = sel;
    } else {
      const inp = doc.createElement("input");
      if (f.type === "integer") {
        inp.type = "number";
        inp.step = "1";
        inp.inputMode = "numeric";
      } else {
        inp.type = "text";
      }
      input = inp;
    }
    input.id = id;
    input.name = f.name;
    input.dataset["variable"] = f.name;
    input.required = f.required;
    const v = Object.prototype.hasOwnProperty.call(values, f.name) ? values[f.name] : undefined;
    if (v !== undefined) input.value = v;
    wrap.append(label, input);
    nodes.push(wrap);
  });
  container.replaceChildren(...nodes);
}

function variableInputs(container: HTMLElement): (HTMLInputElement | HTMLSelectElement)[] {
  return Array.from(container.querySelectorAll<HTMLInputElement | HTMLSelectElement>("[data-variable]"));
}

/** The raw values of the rendered variable inputs, by variable name. */
export function readVariableFields(container: HTMLElement): Record<string, string> {
  const entries: [string, string][] = [];
  for (const el of variableInputs(container)) entries.push([el.dataset["variable"] ?? "", el.value]);
  return Object.fromEntries(entries);
}

/** Mark the invalid inputs (`aria-invalid`); returns the first one, to focus. */
export function markVariableErrors(container: HTMLElement, invalidNames: readonly string[]): HTMLElement | null {
  let first: HTMLElement | null = null;
  for (const el of variableInputs(container)) {
    if (invalidNames.includes(el.dataset["variable"] ?? "")) {
      el.setAttribute("aria-invalid", "true");
      first ??= el;
    } else {
      el.removeAttribute("aria-invalid");
    }
  }
  return first;
}
