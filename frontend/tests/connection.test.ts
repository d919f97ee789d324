import { expect, test } from "vitest";

import { Connection } from "../src/connection.ts";

test("frames go out as JSON once a transport is attached; false while it is down", () => {
  const c = new Connection();
  const frame = { type: "chat.stop" as const, id: "s1" };
  expect(c.send(frame)).toBe(false); // no transport yet
  const sent: string[] = [];
  const link = { up: true };
  c.attach({ send: (d) => link.up && sent.push(d) > 0 });
  expect(c.send(frame)).toBe(true);
  link.up = false;
  expect(c.send(frame)).toBe(false);
  expect(sent).toEqual(['{"type":"chat.stop","id":"s1"}']);
});

test("opened() tells a reconnect from the first open", () => {
  const c = new Connection();
  expect(c.opened()).toBe(false);
  expect(c.opened()).toBe(true);
  c.closed();
  expect(c.opened()).toBe(true);
});

test("a closed connection drops the reply ids awaited on it", () => {
  const c = new Connection();
  const ratings = c.awaitedReplies();
  const reports = c.awaitedReplies();
  ratings.add("r1");
  reports.add("t1");
  expect(ratings.settle("t1")).toBe(false);
  expect(ratings.settle(null)).toBe(false);
  expect(ratings.settle("r1")).toBe(true);
  expect(ratings.settle("r1")).toBe(false); // once
  ratings.add("r2");
  c.closed();
  expect(ratings.settle("r2")).toBe(false);
  expect(reports.settle("t1")).toBe(false);
});
