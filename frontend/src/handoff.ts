// "Talk to a person" (docs/handoff.md): the bar above the composer that says who answers the
// conversation, in the server's words, and asks for a person or stops waiting for one.

import type { HandoffStateFrame } from "./protocol.ts";

export type HandoffState = HandoffStateFrame["state"];
export type HandoffAction = "request" | "cancel";

export const REQUEST_LABEL = "Talk to a person";
/** Said after a thumbs-down, beside the button. */
export const OFFER_TEXT = "Sorry that did not help. A person of the team can take over.";
/** Under an answer that says it cannot help, or that answers an ask for a person. */
export const CANNOT_HELP_TEXT = "A person of the team can help with this.";
export const CANCEL_LABEL = "Stop waiting";

export interface HandoffElements {
  bar: HTMLElement;
  notice: HTMLElement;
  button: HTMLButtonElement;
  /** Shown while waiting with nobody of the team online: an email address to write to. */
  contact: HTMLFormElement | null;
  email: HTMLInputElement | null;
}

/** What the server said beyond the state. */
export interface HandoffDetails {
  nobodyOnline: boolean;
  contactEmail: string | null;
}

/** `#chat-handoff` and its parts; null on a page without one. */
export function handoffElements(doc: Document): HandoffElements | null {
  const bar = doc.getElementById("chat-handoff");
  const notice = doc.getElementById("handoff-notice");
  const button = doc.getElementById("handoff-action");
  if (!(bar instanceof HTMLElement && notice instanceof HTMLElement && button instanceof HTMLButtonElement)) return null;
  const contact = doc.getElementById("handoff-contact");
  const email = doc.getElementById("handoff-email");
  return {
    bar,
    notice,
    button,
    contact: contact instanceof HTMLFormElement ? contact : null,
    email: email instanceof HTMLInputElement ? email : null,
  };
}

/** What the bar offers: a person can be asked for once the conversation exists (the
 * assistant answers it), and stopped waiting for while waiting; nothing while one holds it. */
export function offeredAction(state: HandoffState, hasConversation: boolean): HandoffAction | null {
  if (!hasConversation) return null;
  if (state === "waiting") return "cancel";
  if (state === "with_agent") return null;
  return "request";
}

/** How long "Dana is typing…" shows after the last sign of it, and how often the page tells
 * the server its customer is typing. */
export const TYPING_SHOWN_MS = 4000;
export const TYPING_EVERY_MS = 2000;

export class HandoffBar {
  private action: HandoffAction | null = null;
  /** The page offered a person (after a thumbs-down) and the offer stands. */
  offered = false;
  private notice = "";
  private typingTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly el: HandoffElements,
    onAction: (action: HandoffAction) => void,
    onContact: (email: string) => void = () => undefined,
  ) {
    el.button.addEventListener("click", () => {
      if (this.action !== null) onAction(this.action);
    });
    el.contact?.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const email = el.email?.value.trim() ?? "";
      if (email !== "") onContact(email);
    });
  }

  /** Show `state` with the server's `notice` ("" before the server said anything). */
  show(state: HandoffState, notice: string, hasConversation: boolean, details: HandoffDetails = { nobodyOnline: false, contactEmail: null }): void {
    if (this.el.contact !== null) this.el.contact.hidden = !(state === "waiting" && details.nobodyOnline && details.contactEmail === null);
    this.el.bar.dataset["state"] = state;
    this.offered = false;
    delete this.el.bar.dataset["offer"];
    this.notice = notice;
    if (this.typingTimer === null) this.el.notice.textContent = notice;
    this.action = offeredAction(state, hasConversation);
    this.el.button.hidden = this.action === null;
    this.el.button.textContent = this.action === "cancel" ? CANCEL_LABEL : REQUEST_LABEL;
  }

  /** Offer a person (an answer did not help, or could not), while the assistant answers. */
  offer(text: string = OFFER_TEXT): void {
    if (this.action !== "request") return;
    this.offered = true;
    this.el.bar.dataset["offer"] = "1";
    this.notice = text;
    if (this.typingTimer === null) this.el.notice.textContent = text;
  }

  /** The person's message came: they are no longer typing it. */
  typingDone(): void {
    if (this.typingTimer !== null) clearTimeout(this.typingTimer);
    this.typingTimer = null;
    this.el.notice.textContent = this.notice;
  }

  /** "Dana is typing…" in place of the notice, for a few seconds after the last sign. */
  showTyping(agent: string): void {
    if (this.typingTimer !== null) clearTimeout(this.typingTimer);
    this.el.notice.textContent = `${agent} is typing…`;
    this.typingTimer = setTimeout(() => {
      this.typingTimer = null;
      this.el.notice.textContent = this.notice;
    }, TYPING_SHOWN_MS);
  }
}
