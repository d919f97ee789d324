// src/format.ts
function ms(v) {
  return `${Math.round(v)} ms`;
}
function formatAnswerStats(s) {
  const parts = [];
  if (s.clientTtftMs !== null) {
    parts.push(`first token ${ms(s.clientTtftMs)}` + (s.serverTtftMs !== null ? ` (server ${ms(s.serverTtftMs)})` : ""));
  } else if (s.serverTtftMs !== null) {
    parts.push(`first token (server) ${ms(s.serverTtftMs)}`);
  }
  if (s.completionTokens !== null) {
    parts.push(`${s.completionTokens} ${s.completionTokens === 1 ? "token" : "tokens"}`);
  }
  if (s.status === "stopped") parts.push("stopped");
  else if (s.status === "failed") parts.push("failed");
  else if (s.finishReason === "length") parts.push("length limit reached");
  return parts.join(" · ");
}

// src/protocol.ts
function sendFrame(id, conversationId, text) {
  return { type: "chat.send", id, conversation_id: conversationId, text };
}
function stopFrame(id, messageId) {
  return messageId === null ? { type: "chat.stop", id } : { type: "chat.stop", id, message_id: messageId };
}
function isObj(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
function str(o, key) {
  const v = o[key];
  return typeof v === "string" ? v : void 0;
}
function strOrNull(o, key) {
  const v = o[key];
  if (v === null || v === void 0) return null;
  return typeof v === "string" ? v : void 0;
}
function numOrNull(o, key) {
  const v = o[key];
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}
function parseUsage(v) {
  const o = isObj(v) ? v : {};
  return {
    prompt_tokens: numOrNull(o, "prompt_tokens"),
    completion_tokens: numOrNull(o, "completion_tokens"),
    cached_prompt_tokens: numOrNull(o, "cached_prompt_tokens")
  };
}
function parseTimings(v) {
  const o = isObj(v) ? v : {};
  return {
    queue_wait_ms: numOrNull(o, "queue_wait_ms"),
    ttft_ms: numOrNull(o, "ttft_ms"),
    total_ms: numOrNull(o, "total_ms")
  };
}
function parseServerFrame(raw) {
  if (typeof raw !== "string") return null;
  let data;
  try {
    data = JSON.parse(raw);
  } catch {
    return null;
  }
  if (!isObj(data)) return null;
  switch (data["type"]) {
    case "chat.accepted": {
      const id = str(data, "id");
      const conversation_id = str(data, "conversation_id");
      const user_message_id = str(data, "user_message_id");
      const assistant_message_id = str(data, "assistant_message_id");
      if (id === void 0 || conversation_id === void 0 || user_message_id === void 0 || assistant_message_id === void 0) {
        return null;
      }
      return { type: "chat.accepted", id, conversation_id, user_message_id, assistant_message_id };
    }
    case "chat.delta": {
      const message_id = str(data, "message_id");
      const text = str(data, "text");
      const seq = data["seq"];
      if (message_id === void 0 || text === void 0 || typeof seq !== "number" || !Number.isInteger(seq)) {
        return null;
      }
      return { type: "chat.delta", message_id, seq, text };
    }
    case "chat.done": {
      const message_id = str(data, "message_id");
      const status = data["status"];
      if (message_id === void 0 || status !== "complete" && status !== "stopped") return null;
      return {
        type: "chat.done",
        message_id,
        status,
        finish_reason: str(data, "finish_reason") ?? "",
        usage: parseUsage(data["usage"]),
        timings: parseTimings(data["timings"])
      };
    }
    case "chat.error": {
      const id = strOrNull(data, "id");
      const message_id = strOrNull(data, "message_id");
      const code = str(data, "code");
      const message = str(data, "message");
      if (id === void 0 || message_id === void 0 || code === void 0 || message === void 0) return null;
      return { type: "chat.error", id, message_id, code, message };
    }
    default:
      return null;
  }
}

// src/socket.ts
var BACKOFF_INITIAL_MS = 500;
var BACKOFF_MAX_MS = 8e3;
function backoffDelay(attempt, initialMs = BACKOFF_INITIAL_MS, maxMs = BACKOFF_MAX_MS) {
  if (!(attempt > 0)) return Math.min(initialMs, maxMs);
  return Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
}
function chatSocketUrl(loc, path = "/ws/chat/") {
  const scheme = loc.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${loc.host}${path}`;
}
var OPEN = 1;
var ReconnectingSocket = class {
  constructor(url, handlers = {}, options = {}) {
    this.url = url;
    this.handlers = handlers;
    this.socket = null;
    this.attempt = 0;
    this.timer = null;
    this.stopped = false;
    this.createSocket = options.createSocket ?? ((u) => new WebSocket(u));
    this.setTimer = options.setTimer ?? ((fn, ms2) => setTimeout(fn, ms2));
    this.clearTimer = options.clearTimer ?? ((h) => clearTimeout(h));
    this.initialDelayMs = options.initialDelayMs ?? BACKOFF_INITIAL_MS;
    this.maxDelayMs = options.maxDelayMs ?? BACKOFF_MAX_MS;
  }
  get connected() {
    return this.socket !== null && this.socket.readyState === OPEN;
  }
  start() {
    this.stopped = false;
    if (this.socket === null && this.timer === null) this.connect("connecting");
  }
  /** Send a frame; returns false (and sends nothing) when the socket is not open. */
  send(data) {
    if (!this.connected || this.socket === null) return false;
    try {
      this.socket.send(data);
      return true;
    } catch {
      return false;
    }
  }
  /** Close for good (no reconnect). */
  stop() {
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
  connect(state) {
    this.timer = null;
    this.handlers.onState?.(state, null);
    let s;
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
    s.onerror = () => void 0;
    s.onclose = () => {
      if (this.socket !== s) return;
      s.onopen = s.onclose = s.onerror = s.onmessage = null;
      this.socket = null;
      this.handlers.onClose?.();
      this.scheduleReconnect();
    };
  }
  scheduleReconnect() {
    if (this.stopped) return;
    const delay = backoffDelay(this.attempt, this.initialDelayMs, this.maxDelayMs);
    this.attempt += 1;
    this.handlers.onState?.("reconnecting", delay);
    this.timer = this.setTimer(() => this.connect("reconnecting"), delay);
  }
};

// src/view.ts
var MessageView = class {
  constructor(doc, role, status, messageId, content = "") {
    this.text = null;
    this.meta = null;
    const el = doc.createElement("div");
    el.className = `message message-${role}`;
    el.dataset["role"] = role;
    if (messageId !== null) el.dataset["messageId"] = messageId;
    this.element = el;
    this.setStatus(status);
    if (content !== "") this.append(content);
  }
  get messageId() {
    return this.element.dataset["messageId"] ?? null;
  }
  set messageId(id) {
    if (id === null) delete this.element.dataset["messageId"];
    else this.element.dataset["messageId"] = id;
  }
  get status() {
    return this.element.dataset["status"] ?? "";
  }
  setStatus(status) {
    setMessageStatus(this.element, status);
  }
  /** Append text without touching what is already rendered (extends one text node). */
  append(text) {
    if (text === "") return;
    if (this.text === null) {
      this.text = this.element.ownerDocument.createTextNode(text);
      this.element.appendChild(this.text);
    } else {
      this.text.appendData(text);
    }
  }
  /**
   * The small muted line under the message. It is a sibling of the message element (not a
   * child), so the message element's text is exactly the message content.
   */
  setMeta(line, data = {}) {
    if (this.meta === null) {
      const meta = this.element.ownerDocument.createElement("p");
      meta.className = `message-meta message-meta-${this.element.dataset["role"] ?? ""}`;
      this.element.after(meta);
      this.meta = meta;
    }
    this.meta.textContent = line;
    for (const [k, v] of Object.entries(data)) this.meta.dataset[k] = v;
    if (this.messageId !== null) this.meta.dataset["for"] = this.messageId;
  }
  remove() {
    this.meta?.remove();
    this.element.remove();
  }
};
function setMessageStatus(el, status) {
  el.dataset["status"] = status;
  if (status === "streaming" || status === "pending") el.setAttribute("aria-busy", "true");
  else el.removeAttribute("aria-busy");
}
function readJsonScript(doc, id) {
  const el = doc.getElementById(id);
  if (el === null || el.textContent === null) return void 0;
  try {
    return JSON.parse(el.textContent);
  } catch {
    return void 0;
  }
}
function parseHistory(data) {
  if (!Array.isArray(data)) return [];
  const out = [];
  for (const item of data) {
    if (typeof item !== "object" || item === null) continue;
    const o = item;
    const role = o["role"];
    if (role !== "user" && role !== "assistant") continue;
    out.push({
      id: typeof o["id"] === "string" ? o["id"] : String(o["id"] ?? ""),
      role,
      content: typeof o["content"] === "string" ? o["content"] : "",
      status: typeof o["status"] === "string" && o["status"] !== "" ? o["status"] : "complete"
    });
  }
  return out;
}

// src/chat.ts
function newId() {
  const c = globalThis.crypto;
  if (typeof c.randomUUID === "function") return c.randomUUID();
  const b = c.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] ?? 0) & 15 | 64;
  b[8] = (b[8] ?? 0) & 63 | 128;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
var STATE_TEXT = {
  connecting: "connecting…",
  connected: "connected",
  reconnecting: "reconnecting…"
};
var ChatController = class {
  constructor(el, conversationId, now = () => performance.now()) {
    this.el = el;
    this.conversationId = conversationId;
    this.now = now;
    this.transport = null;
    this.pending = null;
    this.active = null;
    this.doc = el.log.ownerDocument;
  }
  attach(transport) {
    this.transport = transport;
    const { form, input, stop } = this.el;
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.submit();
    });
    input.addEventListener("keydown", (ev) => {
      if (ev.key !== "Enter" || ev.shiftKey || ev.isComposing || ev.keyCode === 229) return;
      ev.preventDefault();
      this.submit();
    });
    stop.addEventListener("click", () => this.requestStop());
    this.updateControls();
  }
  renderHistory(data) {
    for (const item of parseHistory(data)) {
      const view = new MessageView(this.doc, item.role, item.status, item.id, item.content);
      this.el.log.appendChild(view.element);
    }
    this.el.log.scrollTop = this.el.log.scrollHeight;
  }
  // ---- connection ----
  onConnectionState(state) {
    this.el.status.textContent = STATE_TEXT[state];
    this.el.status.dataset["state"] = state;
  }
  onOpen() {
    if (this.pending !== null) this.transmit(this.pending);
  }
  onClose() {
    if (this.pending !== null) this.pending.transmitted = false;
    const a = this.active;
    if (a !== null) {
      this.active = null;
      a.view.setStatus("failed");
      a.view.setMeta("connection lost · reload to see the saved answer");
    }
    this.updateControls();
  }
  onMessage(raw) {
    const frame = parseServerFrame(raw);
    if (frame === null) {
      console.warn("chat: ignoring unexpected frame", raw);
      return;
    }
    switch (frame.type) {
      case "chat.accepted":
        return this.onAccepted(frame);
      case "chat.delta":
        return this.onDelta(frame);
      case "chat.done":
        return this.onDone(frame);
      case "chat.error":
        return this.onError(frame);
    }
  }
  // ---- user actions ----
  get busy() {
    return this.pending !== null || this.active !== null;
  }
  submit() {
    if (this.busy) return;
    const text = this.el.input.value;
    if (text.trim() === "") return;
    this.clearAlert();
    const frame = sendFrame(newId(), this.conversationId, text);
    const user = new MessageView(this.doc, "user", "pending", null, text);
    this.appendToLog(user.element, true);
    this.pending = { frame, user, transmitted: false, sentAt: this.now() };
    this.transmit(this.pending);
    this.updateControls();
  }
  requestStop() {
    const a = this.active;
    if (a === null || a.stopId !== null) return;
    const id = newId();
    if (this.transport?.send(JSON.stringify(stopFrame(id, a.messageId))) !== true) {
      this.showAlert("Not connected: could not stop the answer.");
      return;
    }
    a.stopId = id;
    this.updateControls();
  }
  // ---- server frames ----
  onAccepted(f) {
    const p = this.pending;
    if (p === null || p.frame.id !== f.id) return;
    this.pending = null;
    this.conversationId = f.conversation_id;
    this.updateUrl(f.conversation_id);
    if (this.el.input.value === p.frame.text) this.el.input.value = "";
    p.user.messageId = f.user_message_id;
    p.user.setStatus("complete");
    const view = new MessageView(this.doc, "assistant", "streaming", f.assistant_message_id);
    this.appendToLog(view.element, true);
    this.active = {
      messageId: f.assistant_message_id,
      view,
      sentAt: p.sentAt,
      firstDeltaAt: null,
      firstPaintAt: null,
      lastSeq: 0,
      stopId: null,
      done: null
    };
    this.updateControls();
  }
  onDelta(f) {
    const a = this.active;
    if (a === null || a.messageId !== f.message_id) return;
    if (f.seq <= a.lastSeq) return;
    if (f.seq !== a.lastSeq + 1) console.warn(`chat: delta gap, expected seq ${a.lastSeq + 1}, got ${f.seq}`);
    a.lastSeq = f.seq;
    const stick = this.nearBottom();
    a.view.append(f.text);
    if (stick) this.el.log.scrollTop = this.el.log.scrollHeight;
    if (a.firstDeltaAt === null && f.text !== "") {
      a.firstDeltaAt = this.now();
      if (typeof requestAnimationFrame === "function") {
        requestAnimationFrame(() => {
          a.firstPaintAt = this.now();
          if (a.done !== null) this.renderStats(a, a.done);
        });
      }
    }
  }
  onDone(f) {
    const a = this.active;
    if (a === null || a.messageId !== f.message_id) {
      this.setStatusById(f.message_id, f.status);
      return;
    }
    this.active = null;
    a.done = f;
    a.view.setStatus(f.status);
    this.renderStats(a, f);
    this.updateControls();
    this.el.input.focus();
  }
  /** "first token 142 ms (server 97 ms) · 23 tokens" under the answer. */
  renderStats(a, f) {
    const first = a.firstPaintAt ?? a.firstDeltaAt;
    const clientTtft = first === null ? null : Math.max(0, first - a.sentAt);
    const data = {};
    if (clientTtft !== null) data["ttftMs"] = String(Math.round(clientTtft));
    if (f.timings.ttft_ms !== null) data["serverTtftMs"] = String(f.timings.ttft_ms);
    a.view.setMeta(
      formatAnswerStats({
        clientTtftMs: clientTtft,
        serverTtftMs: f.timings.ttft_ms,
        completionTokens: f.usage.completion_tokens,
        status: f.status,
        finishReason: f.finish_reason
      }),
      data
    );
  }
  onError(f) {
    this.showAlert(f.message || `Error: ${f.code}`);
    const p = this.pending;
    if (p !== null && f.id === p.frame.id) {
      this.pending = null;
      p.user.remove();
      this.updateControls();
      this.el.input.focus();
      return;
    }
    const a = this.active;
    if (a !== null && f.message_id === a.messageId && (a.stopId === null || f.id !== a.stopId)) {
      this.active = null;
      a.view.setStatus("failed");
      a.view.setMeta("failed");
      this.updateControls();
      return;
    }
    if (a !== null && a.stopId !== null && f.id === a.stopId) {
      a.stopId = null;
      this.updateControls();
      return;
    }
    if (f.message_id !== null && f.code === "engine") this.setStatusById(f.message_id, "failed");
  }
  // ---- helpers ----
  transmit(p) {
    if (p.transmitted) return;
    p.sentAt = this.now();
    p.transmitted = this.transport?.send(JSON.stringify(p.frame)) === true;
  }
  updateControls() {
    this.el.send.disabled = this.busy;
    this.el.stop.disabled = this.active === null || this.active.stopId !== null;
  }
  showAlert(message) {
    this.el.alert.textContent = message;
    this.el.alert.hidden = false;
  }
  clearAlert() {
    this.el.alert.textContent = "";
    this.el.alert.hidden = true;
  }
  updateUrl(conversationId) {
    const path = `/c/${encodeURIComponent(conversationId)}/`;
    if (globalThis.location?.pathname !== path) history.replaceState(history.state, "", path);
  }
  /** Status change for a message this page is not streaming (e.g. one from the history). */
  setStatusById(messageId, status) {
    for (const el of Array.from(this.el.log.querySelectorAll(".message[data-message-id]"))) {
      if (el.dataset["messageId"] === messageId) setMessageStatus(el, status);
    }
  }
  nearBottom() {
    const log = this.el.log;
    return log.scrollHeight - log.scrollTop - log.clientHeight < 48;
  }
  appendToLog(node, scroll) {
    this.el.log.appendChild(node);
    if (scroll) this.el.log.scrollTop = this.el.log.scrollHeight;
  }
};
function required(doc, id, type) {
  const el = doc.getElementById(id);
  if (!(el instanceof type)) throw new Error(`chat: missing #${id}`);
  return el;
}
function start(doc = document) {
  const el = {
    log: required(doc, "chat-log", HTMLElement),
    form: required(doc, "chat-form", HTMLFormElement),
    input: required(doc, "chat-input", HTMLTextAreaElement),
    send: required(doc, "chat-send", HTMLButtonElement),
    stop: required(doc, "chat-stop", HTMLButtonElement),
    alert: required(doc, "chat-alert", HTMLElement),
    status: required(doc, "connection-status", HTMLElement)
  };
  const conv = readJsonScript(doc, "conversation-id");
  const controller = new ChatController(el, typeof conv === "string" && conv !== "" ? conv : null);
  controller.renderHistory(readJsonScript(doc, "chat-history"));
  const socket = new ReconnectingSocket(chatSocketUrl(location), {
    onOpen: () => controller.onOpen(),
    onMessage: (data) => controller.onMessage(data),
    onClose: () => controller.onClose(),
    onState: (state) => controller.onConnectionState(state)
  });
  controller.attach(socket);
  socket.start();
  return controller;
}
if (typeof document !== "undefined" && document.getElementById("chat-log") !== null) {
  start();
}
export {
  ChatController,
  newId,
  start
};
//# sourceMappingURL=chat.js.map
