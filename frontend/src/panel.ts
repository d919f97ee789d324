// The widget's panel (chatapp/widget/templates/widget/panel.html), in an iframe on a customer's
// website: the chat page's controller on the panel's elements, as a guest.
//
// The guest's token lives in this frame's localStorage (partitioned by the host site in
// browsers that partition third-party storage), so a reload or a later visit is the same
// guest and continues its latest conversation. The socket carries the token as its second
// subprotocol. A token the server refuses (4401: forged, expired, another site's) is dropped
// and the panel enters again as a new guest; 4403 (the site is off, or this page is no longer
// allowed) stops it with a notice.

import { ChatController } from "./controller.ts";
import { pageElements } from "./page.ts";
import { chatSocketUrl, ReconnectingSocket, type SocketLike } from "./socket.ts";
import { warmAnswerRendering, whenIdle } from "./stream.ts";
import { browserStorage, TemplateStore, usePatchTools } from "./templates.ts";

export const GUEST_PROTOCOL = "chat.guest.v1";
const TOKEN_REFUSED = 4401;
const WIDGET_REFUSED = 4403;

export interface GuestEntry {
  token: string;
  conversationId: string | null;
  history: unknown;
}

export interface PanelSettings {
  site: string;
  host: string;
  socketPath: string;
}

/** The token's storage key: one guest per site (and, with partitioned storage, per host site). */
export function tokenKey(site: string): string {
  return `instant-chat:guest:${site}`;
}

function storedToken(storage: Storage | null, site: string): string | null {
  try {
    return storage?.getItem(tokenKey(site)) ?? null;
  } catch {
    return null; // storage blocked: a new guest each visit
  }
}

function storeToken(storage: Storage | null, site: string, token: string | null): void {
  try {
    if (token === null) storage?.removeItem(tokenKey(site));
    else storage?.setItem(tokenKey(site), token);
  } catch {
    // storage blocked or full: the chat works, it just is not remembered
  }
}

type Fetch = (url: string, init: RequestInit) => Promise<Response>;

/** POST /widget/guest: the guest of the stored token, or (without one, or when it is refused)
 * a new guest. Throws with the server's words when the widget is refused. */
export async function guestEnter(fetchFn: Fetch, storage: Storage | null, s: PanelSettings): Promise<GuestEntry> {
  let token = storedToken(storage, s.site);
  for (;;) {
    const response = await fetchFn("/widget/guest", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ site: s.site, host: s.host, ...(token === null ? {} : { token }) }),
    });
    // a proxy's error page is not JSON: it is then just "not available"
    const body = (await response.json().catch(() => ({}))) as {
      token?: string;
      conversation_id?: string | null;
      history?: unknown;
      error?: { message?: string };
    };
    if (response.status === 401 && token !== null) {
      token = null; // forged, expired or another site's: start over as a new guest
      storeToken(storage, s.site, null);
      continue;
    }
    if (!response.ok || typeof body.token !== "string") {
      throw new Error(body.error?.message ?? "This chat is not available.");
    }
    storeToken(storage, s.site, body.token);
    return { token: body.token, conversationId: body.conversation_id ?? null, history: body.history ?? [] };
  }
}

function settingsOf(doc: Document): PanelSettings {
  const d = doc.body.dataset;
  return { site: d["site"] ?? "", host: d["host"] ?? "", socketPath: d["socket"] ?? "" };
}

function showUnavailable(doc: Document, message: string): void {
  const alert = doc.getElementById("chat-alert");
  if (alert !== null) {
    alert.textContent = message;
    alert.hidden = false;
  }
  const form = doc.getElementById("chat-form");
  if (form instanceof HTMLFormElement) for (const el of Array.from(form.elements)) (el as HTMLButtonElement).disabled = true;
}

let openAsked = false;
let panelReady = false;

/** The launcher's click (src/widget.ts) asks for the input (only the host page may ask); a
 * click that comes before the panel is ready is kept until it is, and one that came before
 * this document loaded is asked again ("ready"). */
function focusWhenAsked(doc: Document, host: string, ready = false): void {
  const focus = (): void => doc.getElementById("chat-input")?.focus();
  if (ready) {
    panelReady = true;
    if (openAsked) focus();
    // a click before this document existed was lost: the loader answers this with "open"
    // when the panel is shown
    if (window.parent !== window) window.parent.postMessage("instant-chat:ready", host);
    return;
  }
  addEventListener("message", (ev) => {
    if (ev.origin !== host || ev.data !== "instant-chat:open") return;
    openAsked = true;
    if (panelReady) focus();
  });
}

export async function startPanel(doc: Document = document): Promise<ChatController | null> {
  const settings = settingsOf(doc);
  focusWhenAsked(doc, settings.host);
  const storage = (() => {
    try {
      return globalThis.localStorage;
    } catch {
      return null;
    }
  })();
  let entry: GuestEntry;
  try {
    entry = await guestEnter((url, init) => fetch(url, init), storage, settings);
  } catch (err) {
    // fetch itself failing (TypeError) is the network, not the server's refusal
    const offline = "Cannot reach the chat. Check your connection, then reload the page.";
    showUnavailable(doc, err instanceof TypeError ? offline : (err as Error).message);
    return null;
  }
  const controller = new ChatController(pageElements(doc), entry.conversationId, {
    showConversation: () => undefined, // the panel has no address bar; the server remembers
  });
  controller.renderHistory(entry.history);
  // The site's templates, kept in this frame's storage and revalidated (ETag) on each load.
  const templates = new TemplateStore({
    fetch: (url, init) => fetch(url, init),
    storage: browserStorage(),
    url: `/widget/templates?site=${encodeURIComponent(settings.site)}`,
    storageKey: `instant-chat:templates:${settings.site}`,
  });
  templates.load();
  // diff-match-patch (~9 kB) is a chunk of its own, fetched by the first templated send
  usePatchTools({
    makePatch: async (base, edited) => (await import("./textpatch.ts")).makePatch(base, edited),
    sha256Hex: async (text) => (await import("./textpatch.ts")).sha256Hex(text),
  });
  controller.attachTemplates(templates);
  void templates.revalidate();
  let token = entry.token;
  const socket: ReconnectingSocket = new ReconnectingSocket(
    chatSocketUrl(location, settings.socketPath),
    {
      onOpen: () => controller.onOpen(),
      onMessage: (data) => controller.onMessage(data),
      onClose: (code, reason) => {
        controller.onClose();
        if (code === WIDGET_REFUSED) {
          socket.stop();
          showUnavailable(doc, reason || "This chat is not available.");
        } else if (code === TOKEN_REFUSED) {
          // the token outlived its guest (retention) or was altered: enter anew, then reconnect
          socket.stop();
          storeToken(storage, settings.site, null);
          void guestEnter((url, init) => fetch(url, init), storage, settings).then(
            (fresh) => {
              token = fresh.token;
              socket.start();
            },
            (err: Error) => showUnavailable(doc, err.message),
          );
        }
      },
      onState: (state) => controller.onConnectionState(state),
    },
    { createSocket: (url): SocketLike => new WebSocket(url, [GUEST_PROTOCOL, token]) },
  );
  controller.attach(socket);
  socket.start();
  // the panel loads on hover: by the click, the first answer's rendering is compiled too
  whenIdle(() => warmAnswerRendering(doc));
  focusWhenAsked(doc, settings.host, true);
  return controller;
}

if (typeof document !== "undefined" && document.body?.dataset["socket"] !== undefined) {
  void startPanel();
}
