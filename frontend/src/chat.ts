// Entry point of the chat page (web/chat.html): builds the ChatController (src/controller.ts)
// on the page's elements and connects it to the socket, the template store and the
// conversation list.

import { ChatController } from "./controller.ts";
import { ConversationList } from "./conversations.ts";
import { attachFirstQuestions } from "./firstquestions.ts";
import { highlightCode } from "./highlight.ts";
import { useHighlighter } from "./markdown.ts";
import { conversationNav, pageElements } from "./page.ts";
import { chatSocketUrl, ReconnectingSocket } from "./socket.ts";
import { warmAnswerRendering, whenIdle } from "./stream.ts";
import { browserStorage, TemplateStore, usePatchTools } from "./templates.ts";
import { makePatch, sha256Hex } from "./textpatch.ts";
import { readJsonScript } from "./view.ts";

export function start(doc: Document = document): ChatController {
  useHighlighter(highlightCode);
  usePatchTools({ makePatch, sha256Hex });
  const el = pageElements(doc);
  const conv = readJsonScript(doc, "conversation-id");
  const conversationId = typeof conv === "string" && conv !== "" ? conv : null;
  const controller = new ChatController(el, conversationId);
  const nav = conversationNav(doc);
  if (nav !== null) {
    controller.attachConversations(new ConversationList(nav, conversationId), readJsonScript(doc, "conversations"), (url, init) => fetch(url, init));
    // Back to a tab (or back to a page from the back/forward cache): other tabs may have
    // started or continued conversations.
    doc.addEventListener("visibilitychange", () => {
      if (doc.visibilityState === "visible") controller.refreshConversations();
    });
    addEventListener("pageshow", (ev) => {
      if (ev.persisted) controller.refreshConversations();
    });
  }
  controller.renderHistory(readJsonScript(doc, "chat-history"));
  const store = new TemplateStore({ fetch: (url, init) => fetch(url, init), storage: browserStorage() });
  store.load();
  controller.attachTemplates(store);
  void store.revalidate();
  const socket = new ReconnectingSocket(chatSocketUrl(location), {
    onOpen: () => controller.onOpen(),
    onMessage: (data) => controller.onMessage(data),
    onClose: () => controller.onClose(),
    onState: (state) => controller.onConnectionState(state),
  });
  controller.attach(socket);
  attachFirstQuestions(doc, el.form, el.input);
  socket.start();
  whenIdle(() => warmAnswerRendering(doc));
  return controller;
}

if (typeof document !== "undefined" && document.getElementById("chat-log") !== null) {
  start();
}
