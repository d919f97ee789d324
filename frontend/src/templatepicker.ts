// The template picker of a new conversation's first message: the preloaded templates
// (TemplateStore) in `#template-select`, the selected one's variable fields, and the draft
// (TemplateDraft) that keeps the message box's text in step with them until the user types
// in it. Also what to send from a template: validated values and the text, then the frame
// (patch against the render, or the full text).

import type { TemplateElements } from "./page.ts";
import { templatedSendFrame, type SendFrame, type VariableValues } from "./protocol.ts";
import { buildTemplatedSend, renderBody, TemplateDraft, validateVariables, type PromptTemplate, type TemplateStore } from "./templates.ts";
import { markVariableErrors, readVariableFields, renderTemplateOptions, renderVariableFields, selectedTemplateId } from "./view.ts";

export interface TemplatePickerHost {
  /** The message box: a template's render goes in, the user edits it there. */
  readonly input: HTMLTextAreaElement;
  /** Templates are only for a new conversation's first message. */
  isNewConversation(): boolean;
  /** A send is prepared or in flight, or an answer streams. */
  isBusy(): boolean;
  showAlert(message: string): void;
  /** The message a template would send changed (a variable, or another template). */
  draftChanged?(): void;
}

/** A templated message ready to be sent: validated values and the text the user sends. */
export interface TemplatedMessage {
  template: PromptTemplate;
  variables: VariableValues;
  text: string;
}

export class TemplatePicker {
  private store: TemplateStore | null = null;
  private readonly draft = new TemplateDraft();

  /** `el` null: the page has no template picker. */
  constructor(
    private readonly el: TemplateElements | null,
    private readonly host: TemplatePickerHost,
  ) {}

  /** Offer the templates of `store` when starting a new conversation. */
  attach(store: TemplateStore): void {
    this.store = store;
    const t = this.el;
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

  /** The template the next message is sent from (null: plain text). */
  get selected(): PromptTemplate | null {
    return this.host.isNewConversation() && this.el !== null ? this.draft.template : null;
  }

  /**
   * The message to send from `template`, or null: a variable is invalid (the alert says
   * which, the first invalid field has the focus) or the text is blank. While the textbox
   * still shows the preview (placeholders of fields left empty), it first shows exactly what
   * is sent: the render with the validated values.
   */
  message(template: PromptTemplate): TemplatedMessage | null {
    const t = this.el;
    if (t === null) return null;
    const { variables, errors } = validateVariables(template, readVariableFields(t.variables));
    const firstInvalid = markVariableErrors(
      t.variables,
      errors.map((e) => e.name),
    );
    if (errors.length > 0) {
      this.host.showAlert(errors.map((e) => e.message).join(" "));
      firstInvalid?.focus();
      return null;
    }
    const input = this.host.input;
    if (this.draft.untouched(input.value)) {
      const base = renderBody(template.body, variables);
      input.value = base;
      this.draft.base = base;
    }
    const text = input.value;
    if (text.trim() === "") return null;
    return { template, variables, text };
  }

  /**
   * The message `template` would send now, for a typing prefill: null until every variable
   * is valid (nothing is marked or shown: the user is still filling them in) or while the
   * text is blank. The textbox is left as it is.
   */
  draftMessage(template: PromptTemplate): TemplatedMessage | null {
    const t = this.el;
    if (t === null) return null;
    const { variables, errors } = validateVariables(template, readVariableFields(t.variables));
    if (errors.length > 0) return null;
    const input = this.host.input.value;
    const text = this.draft.untouched(input) ? renderBody(template.body, variables) : input;
    return text.trim() === "" ? null : { template, variables, text };
  }

  /** The server's `templates.changed` push. */
  changed(etag: string | null): void {
    void this.store?.changed(etag);
  }

  /** The conversation exists: templates are only for its first message. */
  close(): void {
    const t = this.el;
    this.draft.clear();
    if (t === null) return;
    t.select.value = "";
    t.variables.replaceChildren();
    this.updatePicker();
  }

  /** After `template_unknown`: refetch, then move to the current version (keeping the text) or drop the template. */
  async afterTemplateUnknown(templateId: number): Promise<void> {
    const t = this.el;
    const store = this.store;
    if (t === null || store === null) return;
    await store.revalidate();
    const cur = this.draft.template;
    if (!this.offered || this.host.isBusy() || cur === null || cur.id !== templateId) return;
    const fresh = store.find(templateId);
    if (fresh !== null && fresh.version === cur.version && fresh.sha256 === cur.sha256) return;
    // The user's text stays; the next send patches it against the current version's render.
    this.switchTemplate(t, fresh);
    renderTemplateOptions(t.select, store.templates, this.draft.template?.id ?? null, this.draft.template);
    this.updatePicker();
    this.host.showAlert(
      fresh !== null
        ? `The template “${fresh.name}” was updated. Check your message, then send it again.`
        : `The template “${cur.name}” is no longer available. Your text is kept: send it without a template.`,
    );
  }

  private get offered(): boolean {
    return this.host.isNewConversation() && this.el !== null && this.store !== null;
  }

  /** The store's list changed (cache loaded, revalidated, or pushed). */
  private onTemplateList(): void {
    const t = this.el;
    const store = this.store;
    if (t === null || store === null) return;
    if (this.offered) this.followNewVersion(t, store);
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
    if (cur === null || this.host.isBusy()) return;
    const fresh = store.find(cur.id);
    if (fresh !== null && fresh.version === cur.version && fresh.sha256 === cur.sha256) return;
    if (!this.draft.untouched(this.host.input.value)) return;
    this.switchTemplate(t, fresh);
    if (fresh === null) this.host.showAlert(`The template “${cur.name}” is no longer available.`);
  }

  /** Select `template` (null: none), keeping the typed variable values by name and any typed text. */
  private switchTemplate(t: TemplateElements, template: PromptTemplate | null): void {
    renderVariableFields(t.variables, template?.variables ?? [], readVariableFields(t.variables));
    this.showDraftText(this.draft.select(template, readVariableFields(t.variables), this.host.input.value));
  }

  private onTemplateSelected(): void {
    const t = this.el;
    if (t === null || this.store === null) return;
    const id = selectedTemplateId(t.select);
    const held = this.draft.template;
    const template = id === null ? null : (this.store.find(id) ?? (held !== null && held.id === id ? held : null));
    renderVariableFields(t.variables, template?.variables ?? []);
    this.showDraftText(this.draft.select(template, readVariableFields(t.variables), this.host.input.value));
    this.host.draftChanged?.();
  }

  private onVariablesInput(): void {
    const t = this.el;
    if (t === null) return;
    this.showDraftText(this.draft.update(readVariableFields(t.variables), this.host.input.value));
    this.host.draftChanged?.();
  }

  /** The draft's new text for the message box (null: leave the box as it is). */
  private showDraftText(text: string | null): void {
    if (text !== null) this.host.input.value = text;
  }

  private updatePicker(): void {
    const t = this.el;
    if (t === null) return;
    const any = (this.store?.templates.length ?? 0) > 0 || this.draft.template !== null;
    t.picker.hidden = !(this.offered && any);
  }
}

/** The chat.send of a templated message: a patch against the render (or the full text if that fails). */
export async function templatedSend(id: string, m: TemplatedMessage): Promise<SendFrame> {
  try {
    return await buildTemplatedSend(id, m.template, m.variables, m.text);
  } catch (err) {
    console.warn("chat: templated send falls back to the full text", err);
    return templatedSendFrame(id, m.template, m.variables, { kind: "text", text: m.text });
  }
}
