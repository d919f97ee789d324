// The chat page's fixed elements (chatapp/web/templates/web/chat.html), the connection
// status line and the address bar.

import type { ConnectionState } from "./socket.ts";

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

const STATE_TEXT: Record<ConnectionState, string> = {
  connecting: "connecting…",
  connected: "connected",
  reconnecting: "reconnecting…",
};

/** `#connection-status`: its text and `data-state`. */
export function showConnectionState(status: HTMLElement, state: ConnectionState): void {
  status.textContent = STATE_TEXT[state];
  status.dataset["state"] = state;
}

/** The address bar shows `/c/<id>/` once the conversation exists (no navigation). */
export function showConversationUrl(conversationId: string): void {
  const path = `/c/${encodeURIComponent(conversationId)}/`;
  if (globalThis.location?.pathname !== path) history.replaceState(history.state, "", path);
}
