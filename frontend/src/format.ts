// Pure text formatting for the small line under a finished answer.

import type { MessageStatus } from "./protocol.ts";

export interface AnswerStats {
  /** Browser-measured: send -> first delta painted, in ms (null: no token arrived). */
  clientTtftMs: number | null;
  /** The server's `timings.ttft_ms`. */
  serverTtftMs: number | null;
  completionTokens: number | null;
  status: MessageStatus;
  finishReason?: string;
  /** Its first worker died mid-answer and another one went on with it. */
  resumed?: boolean;
}

function ms(v: number): string {
  return `${Math.round(v)} ms`;
}

/** e.g. "first token 142 ms (server 97 ms) · 23 tokens" */
export function formatAnswerStats(s: AnswerStats): string {
  const parts: string[] = [];
  if (s.clientTtftMs !== null) {
    parts.push(`first token ${ms(s.clientTtftMs)}` + (s.serverTtftMs !== null ? ` (server ${ms(s.serverTtftMs)})` : ""));
  } else if (s.serverTtftMs !== null) {
    parts.push(`first token (server) ${ms(s.serverTtftMs)}`);
  }
  // 0 tokens: a FAQ answer (no model involved), where a token count means nothing
  if (s.completionTokens) {
    parts.push(`${s.completionTokens} ${s.completionTokens === 1 ? "token" : "tokens"}`);
  }
  if (s.status === "stopped") parts.push("stopped");
  else if (s.status === "failed") parts.push("failed");
  else if (s.finishReason === "length") parts.push("length limit reached");
  if (s.resumed) parts.push("continued on another worker");
  return parts.join(" · ");
}
