// chat.client_timing from TtftReports alone (the page's use of it: clienttiming.test.ts).
import { expect, test } from "vitest";

import { StreamingAnswer, type StreamView } from "../src/answerstream.ts";
import { Connection } from "../src/connection.ts";
import type { ClientFrame } from "../src/protocol.ts";
import { TtftReports } from "../src/ttftreport.ts";

const view: StreamView = { append: () => undefined, setText: () => undefined, setMeta: () => undefined };

function harness() {
  const sent: ClientFrame[] = [];
  const link = { up: true };
  const connection = new Connection();
  const reports = new TtftReports((f) => link.up && sent.push(f) > 0, connection.awaitedReplies());
  return { sent, link, connection, reports };
}

/** An answer sent at 1000 whose first token arrived at `deltaAt` and was painted at `paintAt`. */
function answer(paintAt: number | null, measured = true, deltaAt = 1005): StreamingAnswer<StreamView> {
  const a = new StreamingAnswer("a1", view, 1000, measured);
  a.applyDelta(1, "Hi", () => deltaAt);
  if (paintAt !== null) a.painted(() => paintAt);
  return a;
}

test("reported once, from the request to the first paint", () => {
  const h = harness();
  const a = answer(1042.34);
  h.reports.report(a);
  h.reports.report(a);
  expect(h.sent).toEqual([{ type: "chat.client_timing", id: (h.sent[0] as { id: string }).id, message_id: "a1", ttft_ms: 42.3 }]);
});

test("not before the first paint, nor for an answer this page did not ask for", () => {
  const h = harness();
  h.reports.report(answer(null));
  h.reports.report(answer(1042, false));
  expect(h.sent).toEqual([]);
});

test("a time the server would refuse is never sent; one that could not go out goes later", () => {
  const h = harness();
  const zero = answer(1000, true, 1000);
  h.reports.report(zero);
  expect(h.sent).toEqual([]);
  const a = answer(1060);
  h.link.up = false;
  h.reports.report(a);
  h.link.up = true;
  h.reports.report(a);
  expect(h.sent.map((f) => f.type === "chat.client_timing" && f.ttft_ms)).toEqual([60]);
});

test("a refusal is recognised while its connection is up, once", () => {
  const h = harness();
  h.reports.report(answer(1050));
  const id = (h.sent[0] as { id: string }).id;
  expect(h.reports.isRefusal(null)).toBe(false);
  expect(h.reports.isRefusal("someone-else")).toBe(false);
  expect(h.reports.isRefusal(id)).toBe(true);
  expect(h.reports.isRefusal(id)).toBe(false);
  h.reports.report(answer(1070));
  h.connection.closed();
  expect(h.reports.isRefusal((h.sent[1] as { id: string }).id)).toBe(false);
});
