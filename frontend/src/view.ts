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
