// DOM helpers for one chat message. All model and user text goes in through text nodes
// (textContent / Text.appendData), never innerHTML.

import { ASK_ASSISTANT_LABEL, FAQ_LABEL_TEXT, pressedStates, RATING_BUTTONS } from "./answers.ts";
import { parseRating, parseSource, type AnswerSource, type Rating } from "./protocol.ts";

export type Role = "user" | "assistant";
/** The documented statuses, plus "pending" for a user message the server has not accepted yet. */
export type ViewStatus = "pending" | "streaming" | "complete" | "stopped" | "failed";

/** What the buttons under a finished answer do. */
export interface AnswerActionHandlers {
  onAskAssistant(): void;
  onRate(rating: Rating): void;
}

export class MessageView {
  readonly element: HTMLElement;
  private text: Text | null = null;
  private meta: HTMLElement | null = null;
  /** The row under a finished answer: FAQ label, "Ask the assistant instead", ratings. */
  private actions: HTMLElement | null = null;
  private askButton: HTMLButtonElement | null = null;
  private rateButtons: [Rating, HTMLButtonElement][] = [];
  private currentRating: Rating | null = null;

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

  /** "faq" or "model" once the answer is finished (`data-source`); "model" before. */
  get source(): AnswerSource {
    return parseSource(this.element.dataset["source"]);
  }

  get rating(): Rating | null {
    return this.currentRating;
  }

  /**
   * Label a finished answer with its source (`data-source` on the message element) and add
   * the row of controls under it (a sibling, like the stats line, so the message element's
   * text stays exactly the answer): for a FAQ answer the "From FAQ" label (`.faq-label`) and
   * "Ask the assistant instead", then "Good answer" / "Bad answer". Replaces an earlier row.
   */
  showAnswerActions(source: AnswerSource, rating: Rating | null, handlers: AnswerActionHandlers): void {
    this.removeActions();
    const doc = this.element.ownerDocument;
    const id = this.messageId;
    this.element.dataset["source"] = source;
    const row = doc.createElement("div");
    row.className = "message-actions";
    row.setAttribute("role", "group");
    row.setAttribute("aria-label", "Answer actions");
    if (id !== null) row.dataset["for"] = id;
    if (source === "faq") {
      const label = doc.createElement("span");
      label.className = "faq-label";
      label.textContent = FAQ_LABEL_TEXT;
      if (id !== null) {
        label.id = `faq-label-${id}`;
        this.element.setAttribute("aria-describedby", label.id);
      }
      const ask = doc.createElement("button");
      ask.type = "button";
      ask.className = "message-action ask-assistant";
      ask.textContent = ASK_ASSISTANT_LABEL;
      ask.addEventListener("click", () => handlers.onAskAssistant());
      row.append(label, ask);
      this.askButton = ask;
    }
    for (const { rating: r, text, label } of RATING_BUTTONS) {
      const b = doc.createElement("button");
      b.type = "button";
      b.className = `message-action rate rate-${r}`;
      b.textContent = text;
      b.title = label;
      b.setAttribute("aria-label", label);
      b.dataset["rating"] = r;
      b.addEventListener("click", () => handlers.onRate(r));
      row.appendChild(b);
      this.rateButtons.push([r, b]);
    }
    (this.meta ?? this.element).after(row);
    this.actions = row;
    this.setRating(rating);
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

  /** Disable every button under the answer (e.g. while it is being asked again). */
  setActionsEnabled(enabled: boolean): void {
    for (const [, b] of this.rateButtons) b.disabled = !enabled;
    if (!enabled) this.setAskEnabled(false);
  }

  /**
   * The answer is generated again into this message (`chat.accepted` of a `chat.regenerate`):
   * empty it, drop its label, buttons and stats line, and mark it streaming.
   */
  restart(): void {
    this.removeActions();
    this.meta?.remove();
    this.meta = null;
    this.text = null;
    this.element.replaceChildren();
    delete this.element.dataset["source"];
    this.element.removeAttribute("aria-describedby");
    this.setStatus("streaming");
  }

  remove(): void {
    this.removeActions();
    this.meta?.remove();
    this.element.remove();
  }

  private removeActions(): void {
    this.actions?.remove();
    this.actions = null;
    this.askButton = null;
    this.rateButtons = [];
    this.currentRating = null;
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
  /** "model" when the item has no `source`. */
  source: AnswerSource;
  /** The stored rating (`feedback`: "up"/"down"; absent or "" = none). */
  feedback: Rating | null;
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
      source: parseSource(o["source"]),
      feedback: parseRating(o["feedback"]),
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
