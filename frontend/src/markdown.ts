// Markdown for answers: marked (GFM) -> HTML -> DOMPurify -> DOM nodes.
//
// Model output is untrusted. Two layers keep it inert:
// 1. marked never passes raw HTML through: an HTML tag in the answer is shown as text (only a
//    bare `<br>` becomes a line break, as in tables). So `<script>`, `<img onerror=…>`,
//    `<iframe>`, `<style>` … appear literally and nothing is parsed as markup.
// 2. DOMPurify then cleans what marked produced, with an allow-list of the tags marked emits
//    and no `style`, no event handlers, no `id`: only http(s) and mailto hrefs survive (a
//    `javascript:`, `data:` or relative link loses its href), every kept link gets
//    `target="_blank" rel="noopener noreferrer"`, classes are limited to highlight.js ones.
// Images are not loaded (no tracking pixels): `![alt](url)` becomes a link to the url.
// Code blocks are highlighted by the page's highlighter (`useHighlighter`; the chat page's is
// src/highlight.ts); a block in another language, or on a page without one, is shown plain.

import DOMPurify, { type Config, type DOMPurify as Purifier, type WindowLike } from "dompurify";
import { Marked, type Links, type Token, type Tokens } from "marked";

/** Highlighted HTML of `code` in `language`, or null for a language it does not know. */
export type Highlighter = (code: string, language: string) => string | null;

// None until a page installs one (the chat page does, src/highlight.ts; the widget's panel
// does not, to stay small): code blocks are then shown plain, with the same classes.
let highlighter: Highlighter | null = null;

export function useHighlighter(h: Highlighter | null): void {
  highlighter = h;
}

/** The link schemes that survive; anything else (javascript:, data:, vbscript:, relative) loses its href. */
export const SAFE_URL = /^(?:https?|mailto):/i;

/** Classes that may stay on rendered elements (highlight.js scopes, the code block's language). */
const SAFE_CLASS = /^(?:hljs(?:-[\w-]+)?|language-[\w#+.-]+|[a-z]+_+)$/;

const ALLOWED_TAGS = [
  "a",
  "blockquote",
  "br",
  "code",
  "del",
  "em",
  "h1",
  "h2",
  "h3",
  "h4",
  "h5",
  "h6",
  "hr",
  "input",
  "li",
  "ol",
  "p",
  "pre",
  "span",
  "strong",
  "table",
  "tbody",
  "td",
  "th",
  "thead",
  "tr",
  "ul",
];

const PURIFY_CONFIG: Config = {
  ALLOWED_TAGS,
  ALLOWED_ATTR: ["href", "title", "class", "start", "align", "type", "checked", "disabled"],
  // Checked against SAFE_URL only where a URL is expected; plain values for these.
  ADD_URI_SAFE_ATTR: ["align", "start", "type"],
  ALLOWED_URI_REGEXP: SAFE_URL,
  ALLOW_DATA_ATTR: false,
  ALLOW_ARIA_ATTR: false,
  ALLOW_UNKNOWN_PROTOCOLS: false,
};

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

const BARE_BR = /^<br\s*\/?>$/i;

const md = new Marked({
  async: false,
  gfm: true,
  // A single newline in an answer is a line break, as it was when answers were plain text.
  breaks: true,
  renderer: {
    html(token: Tokens.HTML | Tokens.Tag): string {
      if (!token.block && BARE_BR.test(token.text.trim())) return "<br>";
      const text = escapeHtml(token.text);
      return token.block ? `<p>${text.replace(/\n+$/, "").replace(/\n/g, "<br>")}</p>\n` : text;
    },
    code(token: Tokens.Code): string {
      const name = /^[\w#+.-]+/.exec(token.lang ?? "")?.[0]?.toLowerCase() ?? "";
      const highlighted = name !== "" && highlighter !== null ? highlighter(token.text, name) : null;
      const body = highlighted ?? escapeHtml(token.text);
      const cls = name === "" ? "hljs" : `hljs language-${name}`;
      return `<pre><code class="${cls}">${body}</code></pre>\n`;
    },
    image(token: Tokens.Image): string {
      const label = escapeHtml(token.text !== "" ? token.text : token.href);
      const title = token.title ? ` title="${escapeHtml(token.title)}"` : "";
      return `<a href="${escapeHtml(token.href)}"${title}>${label}</a>`;
    },
  },
});

/**
 * The top-level blocks of `src` (paragraphs, lists, code blocks …), each with its source
 * `raw`, and the reference definitions (`[name]: url`) found. `knownLinks`: definitions made
 * earlier in the text, when `src` is the rest of it.
 */
export function lexBlocks(src: string, knownLinks: Links | null = null): { blocks: Token[]; links: Links } {
  const lexer = new md.Lexer(md.defaults);
  if (knownLinks !== null) Object.assign(lexer.tokens.links, knownLinks);
  const tokens = lexer.lex(src);
  return { blocks: tokens, links: tokens.links };
}

/** Unsanitized HTML of some blocks (sanitize before use). */
function blocksToHtml(blocks: Token[]): string {
  return md.parser(blocks);
}

const purifiers = new WeakMap<object, Purifier>();

function purifierFor(win: WindowLike): Purifier {
  let p = purifiers.get(win);
  if (p === undefined) {
    p = DOMPurify(win);
    p.addHook("afterSanitizeAttributes", afterSanitizeAttributes);
    purifiers.set(win, p);
  }
  return p;
}

function afterSanitizeAttributes(node: Element): void {
  if (node.nodeType !== 1) return;
  const tag = node.nodeName.toLowerCase();
  const cls = node.getAttribute("class");
  if (cls !== null) {
    const kept = cls.split(/\s+/).filter((c) => SAFE_CLASS.test(c));
    if (kept.length > 0) node.setAttribute("class", kept.join(" "));
    else node.removeAttribute("class");
  }
  if (tag === "a") {
    const href = node.getAttribute("href");
    if (href !== null && SAFE_URL.test(href.trim())) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    } else {
      node.removeAttribute("href");
    }
  } else if (tag === "input") {
    // Only GFM task-list boxes: read-only checkboxes.
    node.setAttribute("type", "checkbox");
    node.setAttribute("disabled", "");
  } else if (tag === "ol") {
    const start = node.getAttribute("start");
    if (start !== null && !/^\d{1,9}$/.test(start)) node.removeAttribute("start");
  } else if (tag === "td" || tag === "th") {
    const align = node.getAttribute("align");
    if (align !== null && !/^(?:left|right|center)$/.test(align)) node.removeAttribute("align");
  }
}

function windowOf(doc: Document): WindowLike {
  const win = doc.defaultView;
  if (win === null) throw new Error("markdown: the document has no window");
  return win as unknown as WindowLike;
}

/** Sanitize HTML into a fragment of inert nodes, ready to insert into `doc`. */
export function sanitizeToFragment(html: string, doc: Document): DocumentFragment {
  return purifierFor(windowOf(doc)).sanitize(html, { ...PURIFY_CONFIG, RETURN_DOM_FRAGMENT: true });
}

/** Sanitized HTML as a string (for tests and diagnostics). */
export function sanitizeToString(html: string, doc: Document): string {
  return purifierFor(windowOf(doc)).sanitize(html, { ...PURIFY_CONFIG, RETURN_DOM_FRAGMENT: false, RETURN_DOM: false });
}

/** Render blocks (from lexBlocks) into sanitized nodes. */
export function renderBlocks(blocks: Token[], doc: Document): DocumentFragment {
  return sanitizeToFragment(blocksToHtml(blocks), doc);
}

/**
 * The whole of `src` as sanitized HTML, without the newlines between blocks: exactly what
 * MarkdownBody shows for it, however the text arrived.
 */
export function renderMarkdownToString(src: string, doc: Document): string {
  return md
    .lexer(src)
    .map((block) => sanitizeToString(blocksToHtml([block]), doc).replace(/^\s+|\s+$/g, ""))
    .join("");
}
