// Shared test helpers (DOM tests run with `// @vitest-environment jsdom`).

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import type { FrameScheduler } from "../src/stream.ts";

/** A frame scheduler the test drives: `runFrame()` runs what was requested since the last one. */
export class FakeFrames implements FrameScheduler {
  private queue = new Map<number, () => void>();
  private next = 1;
  requests = 0;

  request(callback: () => void): unknown {
    const handle = this.next++;
    this.queue.set(handle, callback);
    this.requests += 1;
    return handle;
  }

  cancel(handle: unknown): void {
    this.queue.delete(handle as number);
  }

  get pending(): number {
    return this.queue.size;
  }

  runFrame(): void {
    const callbacks = [...this.queue.values()];
    this.queue.clear();
    for (const cb of callbacks) cb();
  }
}

const HERE = dirname(fileURLToPath(import.meta.url));
const TEMPLATES = join(HERE, "..", "..", "chatapp", "web", "templates");

/**
 * `{% include "NAME" with key="text" flag=True %}` replaced by NAME's text, its `{{ key }}`
 * filled in and its `{% if flag %}...{% endif %}` kept or dropped (what the chat page's
 * composer, web/chat_form.html, uses).
 */
function withIncludes(text: string): string {
  return text.replace(/\{%\s*include\s+"([^"]+)"\s+with\s+([^%]*?)\s*%\}/g, (_tag, name: string, args: string) => {
    const values = new Map<string, string | boolean>();
    for (const m of args.matchAll(/(\w+)=(?:"([^"]*)"|(\w+))/g)) values.set(m[1] ?? "", m[2] ?? m[3] === "True");
    return readFileSync(join(TEMPLATES, name), "utf8")
      .replace(/\{%\s*if\s+(\w+)\s*%\}([\s\S]*?)\{%\s*endif\s*%\}/g, (_if, key: string, body: string) => (values.get(key) ? body : ""))
      .replace(/\{\{\s*(\w+)\s*\}\}/g, (_v, key: string) => String(values.get(key) ?? ""));
  });
}

/**
 * The chat page's body as Django renders it (chatapp/web/templates/web/chat.html), with the
 * template tags removed and the json_script blocks filled in from `data`.
 */
export function chatPageHtml(data: { history?: unknown; conversationId?: string; conversations?: unknown } = {}): string {
  const template = readFileSync(join(TEMPLATES, "web", "chat.html"), "utf8");
  const content = withIncludes(
    template.slice(template.indexOf("{% block content %}") + "{% block content %}".length, template.lastIndexOf("{% endblock %}")),
  );
  const script = (id: string, value: unknown) => `<script id="${id}" type="application/json">${JSON.stringify(value ?? null).replace(/</g, "\\u003C")}</script>`;
  return content
    .replace(/\{#[\s\S]*?#\}/g, "")
    .replace(/\{\{\s*history\|json_script:"chat-history"\s*\}\}/, script("chat-history", data.history ?? []))
    .replace(/\{\{\s*conversation_id\|json_script:"conversation-id"\s*\}\}/, script("conversation-id", data.conversationId ?? ""))
    .replace(/\{\{\s*conversations\|json_script:"conversations"\s*\}\}/, script("conversations", data.conversations ?? []));
}

/** The `content` block of a page template (web/agent_console.html), its comments removed. */
export function pageContentHtml(name: string): string {
  const template = readFileSync(join(TEMPLATES, name), "utf8");
  const content = template.slice(template.indexOf("{% block content %}") + "{% block content %}".length, template.lastIndexOf("{% endblock %}"));
  return content.replace(/\{#[\s\S]*?#\}/g, "");
}

/**
 * What the end-to-end tests count as able to run script (tests/e2e/test_chat.py, _DANGER_JS):
 * executing or embedding elements, event-handler attributes, javascript:/vbscript:/data: URLs.
 */
export function dangerousNodes(root: ParentNode): string[] {
  const found: string[] = [];
  for (const el of Array.from(root.querySelectorAll("*"))) {
    const tag = el.tagName.toLowerCase();
    if (["script", "iframe", "object", "embed", "frame", "base", "meta", "link", "style", "img", "svg", "math", "form", "textarea", "button"].includes(tag)) found.push(`<${tag}>`);
    if (tag === "input" && (el.getAttribute("type") !== "checkbox" || !el.hasAttribute("disabled"))) found.push("<input>");
    for (const attr of Array.from(el.attributes)) {
      const name = attr.name.toLowerCase();
      const value = attr.value.replace(/[\s\u0000-\u001f]/g, "").toLowerCase();
      if (name.startsWith("on")) found.push(`${tag}[${name}]`);
      if (name === "style" || name === "id" || name === "name" || name === "src" || name === "srcdoc" || name === "action" || name === "formaction") found.push(`${tag}[${name}]`);
      if (value.startsWith("javascript:") || value.startsWith("vbscript:") || value.startsWith("data:")) found.push(`${tag}[${name}=${attr.value}]`);
    }
  }
  return found;
}
