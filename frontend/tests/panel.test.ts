import assert from "node:assert/strict";
import { test } from "vitest";

import { guestEnter, tokenKey, type PanelSettings } from "../src/panel.ts";

const SETTINGS: PanelSettings = { site: "site_a", host: "https://shop.example", socketPath: "/ws/guest/site_a/" };

class MemoryStorage {
  readonly items = new Map<string, string>();
  getItem(key: string): string | null {
    return this.items.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.items.set(key, value);
  }
  removeItem(key: string): void {
    this.items.delete(key);
  }
}

type Reply = { status: number; body: unknown };

function server(replies: Reply[]): { fetch: (url: string, init: RequestInit) => Promise<Response>; bodies: unknown[] } {
  const bodies: unknown[] = [];
  return {
    bodies,
    fetch: (url, init) => {
      assert.equal(url, "/widget/guest");
      bodies.push(JSON.parse(String(init.body)));
      const reply = replies.shift();
      assert.ok(reply, "more requests than expected");
      return Promise.resolve(new Response(JSON.stringify(reply.body), { status: reply.status }));
    },
  };
}

test("a first visit enters without a token and keeps the one it gets", async () => {
  const storage = new MemoryStorage();
  const s = server([{ status: 200, body: { token: "t1", conversation_id: null, history: [] } }]);
  const entry = await guestEnter(s.fetch, storage as unknown as Storage, SETTINGS);
  assert.deepEqual(s.bodies, [{ site: "site_a", host: "https://shop.example" }]);
  assert.equal(entry.token, "t1");
  assert.equal(storage.getItem(tokenKey("site_a")), "t1");
});

test("a later visit sends its token and continues its conversation", async () => {
  const storage = new MemoryStorage();
  storage.setItem(tokenKey("site_a"), "t1");
  const history = [{ id: "m1", role: "user", content: "hi", status: "complete" }];
  const s = server([{ status: 200, body: { token: "t2", conversation_id: "c1", history } }]);
  const entry = await guestEnter(s.fetch, storage as unknown as Storage, SETTINGS);
  assert.deepEqual(s.bodies, [{ site: "site_a", host: "https://shop.example", token: "t1" }]);
  assert.equal(entry.conversationId, "c1");
  assert.deepEqual(entry.history, history);
  assert.equal(storage.getItem(tokenKey("site_a")), "t2"); // the expiry slides
});

test("a refused token is dropped and the visitor enters as a new guest", async () => {
  const storage = new MemoryStorage();
  storage.setItem(tokenKey("site_a"), "expired");
  const s = server([
    { status: 401, body: { error: { code: "token_expired", message: "This conversation has expired." } } },
    { status: 200, body: { token: "fresh", conversation_id: null, history: [] } },
  ]);
  const entry = await guestEnter(s.fetch, storage as unknown as Storage, SETTINGS);
  assert.equal(s.bodies.length, 2);
  assert.equal((s.bodies[1] as { token?: string }).token, undefined);
  assert.equal(entry.token, "fresh");
  assert.equal(storage.getItem(tokenKey("site_a")), "fresh");
});

test("a widget the server refuses throws its words and stores nothing", async () => {
  const storage = new MemoryStorage();
  const s = server([{ status: 403, body: { error: { code: "widget_refused", message: "This chat is not available on this website." } } }]);
  await assert.rejects(guestEnter(s.fetch, storage as unknown as Storage, SETTINGS), /not available on this website/);
  assert.equal(storage.items.size, 0);
});

test("with storage blocked the chat still works, as a new guest each visit", async () => {
  const blocked = {
    getItem: () => {
      throw new Error("SecurityError");
    },
    setItem: () => {
      throw new Error("SecurityError");
    },
    removeItem: () => undefined,
  };
  const s = server([{ status: 200, body: { token: "t1", conversation_id: null, history: [] } }]);
  const entry = await guestEnter(s.fetch, blocked as unknown as Storage, SETTINGS);
  assert.equal(entry.token, "t1");
});

test("an error page that is not JSON (a proxy's) reads as not available", async () => {
  const storage = new MemoryStorage();
  const fetchFn = (): Promise<Response> => Promise.resolve(new Response("<html>502</html>", { status: 502 }));
  await assert.rejects(guestEnter(fetchFn, storage as unknown as Storage, SETTINGS), /not available/);
});
