import assert from "node:assert/strict";
import { test } from "vitest";

import { backoffDelay, chatSocketUrl, ReconnectingSocket, type ConnectionState, type SocketLike } from "../src/socket.ts";

test("backoff doubles from 0.5 s up to 8 s", () => {
  assert.deepEqual(
    [0, 1, 2, 3, 4, 5, 6, 100, 5000].map((n) => backoffDelay(n)),
    [500, 1000, 2000, 4000, 8000, 8000, 8000, 8000, 8000],
  );
});

test("socket url follows the page's scheme and host", () => {
  assert.equal(chatSocketUrl({ protocol: "http:", host: "localhost:8000" }), "ws://localhost:8000/ws/chat/");
  assert.equal(chatSocketUrl({ protocol: "https:", host: "chat.example" }), "wss://chat.example/ws/chat/");
});

class FakeSocket implements SocketLike {
  readyState = 0;
  sent: string[] = [];
  onopen: ((ev: Event) => unknown) | null = null;
  onclose: ((ev: CloseEvent) => unknown) | null = null;
  onerror: ((ev: Event) => unknown) | null = null;
  onmessage: ((ev: MessageEvent) => unknown) | null = null;
  constructor(readonly url: string) {}
  send(data: string): void {
    this.sent.push(data);
  }
  close(): void {
    this.readyState = 3;
  }
  open(): void {
    this.readyState = 1;
    this.onopen?.({} as Event);
  }
  drop(): void {
    this.readyState = 3;
    this.onerror?.({} as Event);
    this.onclose?.({} as CloseEvent);
  }
  receive(data: string): void {
    this.onmessage?.({ data } as MessageEvent);
  }
}

function harness() {
  const sockets: FakeSocket[] = [];
  const timers: { fn: () => void; ms: number }[] = [];
  const states: [ConnectionState, number | null][] = [];
  const messages: unknown[] = [];
  let opens = 0;
  let closes = 0;
  const rs = new ReconnectingSocket(
    "ws://h/ws/chat/",
    {
      onOpen: () => opens++,
      onClose: () => closes++,
      onMessage: (d) => messages.push(d),
      onState: (s, ms) => states.push([s, ms]),
    },
    {
      createSocket: (url) => {
        const s = new FakeSocket(url);
        sockets.push(s);
        return s;
      },
      setTimer: (fn, ms) => {
        const t = { fn, ms };
        timers.push(t);
        return t;
      },
      clearTimer: (h) => {
        const i = timers.indexOf(h as { fn: () => void; ms: number });
        if (i >= 0) timers.splice(i, 1);
      },
    },
  );
  const fire = () => {
    const t = timers.shift();
    assert.ok(t, "a reconnect timer is pending");
    t.fn();
    return t.ms;
  };
  return { rs, sockets, timers, states, messages, fire, counts: () => ({ opens, closes }) };
}

test("connects, delivers messages, reconnects with backoff and resets it on open", () => {
  const h = harness();
  h.rs.start();
  assert.equal(h.sockets.length, 1);
  assert.equal(h.sockets[0]?.url, "ws://h/ws/chat/");
  assert.equal(h.rs.send("x"), false, "nothing is sent before open");
  h.sockets[0]?.open();
  assert.equal(h.rs.connected, true);
  assert.equal(h.rs.send("hello"), true);
  assert.deepEqual(h.sockets[0]?.sent, ["hello"]);
  h.sockets[0]?.receive('{"type":"chat.delta"}');
  assert.deepEqual(h.messages, ['{"type":"chat.delta"}']);

  h.sockets[0]?.drop();
  assert.equal(h.rs.connected, false);
  assert.deepEqual(h.counts(), { opens: 1, closes: 1 });
  const delays: number[] = [];
  delays.push(h.fire()); // attempt 1 fails
  h.sockets.at(-1)?.drop();
  delays.push(h.fire());
  h.sockets.at(-1)?.drop();
  delays.push(h.fire());
  h.sockets.at(-1)?.drop();
  delays.push(h.fire());
  h.sockets.at(-1)?.drop();
  delays.push(h.fire());
  h.sockets.at(-1)?.drop();
  delays.push(h.fire());
  assert.deepEqual(delays, [500, 1000, 2000, 4000, 8000, 8000]);
  h.sockets.at(-1)?.open();
  assert.equal(h.counts().opens, 2);
  h.sockets.at(-1)?.drop();
  assert.equal(h.fire(), 500, "backoff restarts after a successful open");

  assert.deepEqual(h.states.slice(0, 4), [
    ["connecting", null],
    ["connected", null],
    ["reconnecting", 500],
    ["reconnecting", null],
  ]);
});

test("stop() closes for good", () => {
  const h = harness();
  h.rs.start();
  h.sockets[0]?.open();
  h.rs.stop();
  assert.equal(h.sockets[0]?.readyState, 3);
  assert.equal(h.timers.length, 0);
  assert.equal(h.rs.send("x"), false);
});
