// Pure rules for the controls under a finished answer: the FAQ label with "Ask the assistant
// instead" (docs/protocol.md, "FAQ answers"), the thumbs up/down and the suggested FAQ
// questions ("Did you mean ...?"). No DOM.

import type { AnswerSource, Rating } from "./protocol.ts";

export const FAQ_LABEL_TEXT = "From FAQ";
export const ASK_ASSISTANT_LABEL = "Ask the assistant instead";
export const REGENERATE_LABEL = "Regenerate";
export const EDIT_LABEL = "Edit";
/** Before the FAQ entries offered under a model answer the FAQ was unsure about. */
export const SUGGESTIONS_LABEL = "Did you mean:";

/** Visible text and accessible name of each rating button. */
export const RATING_BUTTONS: readonly { rating: Rating; text: string; label: string }[] = [
  { rating: "up", text: "👍", label: "Good answer" },
  { rating: "down", text: "👎", label: "Bad answer" },
];

/** A finished answer (rated, labelled): `complete` or `stopped`; not one streaming or failed. */
export function isFinishedAnswer(status: string): boolean {
  return status === "complete" || status === "stopped";
}

export interface AskAssistantState {
  source: AnswerSource;
  messageId: string;
  /** The conversation's newest answer (the server regenerates only that one). */
  newestAnswerId: string | null;
  /** Something is being sent, regenerated or streamed on this page. */
  busy: boolean;
}

/** Whether "Ask the assistant instead" may be used now (else the button is disabled). */
export function canAskAssistant(s: AskAssistantState): boolean {
  return s.source === "faq" && !s.busy && s.newestAnswerId !== null && s.messageId === s.newestAnswerId;
}

/** An answer that may be generated again ("Regenerate"): finished, or failed. */
export function isRegenerable(status: string): boolean {
  return isFinishedAnswer(status) || status === "failed";
}

/** Whether "Regenerate" shows under this answer: the conversation's newest one only. */
export function showsRegenerate(messageId: string, newestAnswerId: string | null): boolean {
  return newestAnswerId !== null && messageId === newestAnswerId;
}

/**
 * Whether the FAQ questions offered under an answer ("Did you mean ...?") show: under the
 * conversation's newest answer only (a click asks the question after it), while nothing is
 * sent or streaming.
 */
export function showsSuggestions(messageId: string, newestAnswerId: string | null, busy: boolean): boolean {
  return !busy && showsRegenerate(messageId, newestAnswerId);
}

/** `aria-pressed` of each rating button for the recorded rating (null: none yet). */
export function pressedStates(rating: Rating | null): Record<Rating, "true" | "false"> {
  return { up: rating === "up" ? "true" : "false", down: rating === "down" ? "true" : "false" };
}
