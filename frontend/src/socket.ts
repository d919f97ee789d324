// A WebSocket that reconnects with exponential backoff. No DOM access; the WebSocket
// constructor and the timer functions are injectable so it can be tested without a browser.

export type ConnectionState = "connecting" | "connected" | "reconnecting";

export const BACKOFF_INITIAL_MS = 500;
export const BACKOFF_MAX_MS = 8000;

/** Delay before reconnect attempt `attempt` (0-based): 0.5 s, 1 s, 2 s, 4 s, 8 s, 8 s ... */
export function backoffDelay(attempt: number, initialMs = BACKOFF_INITIAL_MS, maxMs = BACKOFF_MAX_MS): number {
  if (!(attempt > 0)) return Math.min(initialMs, maxMs);
  // Cap the exponent so huge attempt counts cannot overflow to Infinity.
  return Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
}

/** `ws(s)://<host>/ws/chat/` for the page's own origin. */
export function chatSocketUrl(loc: { protocol: string; host: string }, path = "/ws/chat/"): string {
  const scheme = loc.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${loc.host}${path}`;
}

/** The part of the browser WebSocket API this wrapper uses. */
export interface SocketLike {
  readonly readyState: number;
  onopen: ((ev: Event) => unknown) | null;
  onclose: ((ev: CloseEvent) => unknown) | null;
  onerror: ((ev: Event) => unknown) | null;
  onmessage: ((ev: MessageEvent) => unknown) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

export interface SocketHandlers {
  onOpen?: () => void;
  onMessage?: (data: unknown) => void;
  /** The close's code and reason (the widget's socket closes 4401/4403 with words). */
  onClose?: (code: number, reason: string) => void;
  onState?: (state: ConnectionState, retryInMs: number | null) => void;
}

export interface SocketOptions {
  createSocket?: (url: string) => SocketLike;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
  initialDelayMs?: number;
  maxDelayMs?: number;
}

const OPEN = 1;

export class ReconnectingSocket {
  private socket: SocketLike | null = null;
  private attempt = 0;
  private timer: unknown = null;
  private stopped = false;
  private readonly createSocket: (url: string) => SocketLike;
  private readonly setTimer: (fn: () => void, ms: number) => unknown;
  private readonly clearTimer: (handle: unknown) => void;
  private readonly initialDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(
    private readonly url: string,
    private readonly handlers: SocketHandlers = {},
    options: SocketOptions = {},
  ) {
    this.createSocket = options.createSocket ?? ((u) => new WebSocket(u));
    this.setTimer = options.setTimer ?? ((fn, ms) => setTimeout(fn, ms));
    this.clearTimer = options.clearTimer ?? ((h) => clearTimeout(h as ReturnType<typeof setTimeout>));
    this.initialDelayMs = options.initialDelayMs ?? BACKOFF_INITIAL_MS;
    this.maxDelayMs = options.maxDelayMs ?? BACKOFF_MAX_MS;
  }

  get connected(): boolean {
    return this.socket !== null && this.socket.readyState === OPEN;
  }

  start(): void {
    this.stopped = false;
    if (this.socket === null && this.timer === null) this.connect("connecting");
  }

  /** Send a frame; returns false (and sends nothing) when the socket is not open. */
  send(data: string): boolean {
    if (!this.connected || this.socket === null) return false;
    try {
      this.socket.send(data);
      return true;
    } catch {
      return false;
    }
  }

  /** Close for good (no reconnect). */
  stop(): void {
    this.stopped = true;
    if (this.timer !== null) {
      this.clearTimer(this.timer);
      this.timer = null;
    }
    const s = this.socket;
    this.socket = null;
    if (s !== null) {
      s.onopen = s.onclose = s.onerror = s.onmessage = null;
      s.close();
    }
  }

  private connect(state: ConnectionState): void {
    this.timer = null;
    this.handlers.onState?.(state, null);
    let s: SocketLike;
    try {
      s = this.createSocket(this.url);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.socket = s;
    s.onopen = () => {
      if (this.socket !== s) return;
      this.attempt = 0;
      this.handlers.onState?.("connected", null);
      this.handlers.onOpen?.();
    };
    s.onmessage = (ev) => {
      if (this.socket !== s) return;
      this.handlers.onMessage?.(ev.data);
    };
    // An error is always followed by close; reconnect from onclose only.
    s.onerror = () => undefined;
    s.onclose = (ev) => {
      if (this.socket !== s) return;
      s.onopen = s.onclose = s.onerror = s.onmessage = null;
      this.socket = null;
      this.handlers.onClose?.(ev.code, ev.reason);
      this.scheduleReconnect();
    };
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    const delay = backoffDelay(this.attempt, this.initialDelayMs, this.maxDelayMs);
    this.attempt += 1;
    this.handlers.onState?.("reconnecting", delay);
    this.timer = this.setTimer(() => this.connect("reconnecting"), delay);
  }
}
