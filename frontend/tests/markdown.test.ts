// @vitest-environment jsdom
import { describe, expect, test } from "vitest";

import { highlightCode } from "../src/highlight.ts";
import { escapeHtml, renderMarkdownToString, sanitizeToString, useHighlighter } from "../src/markdown.ts";
import { dangerousNodes } from "./helpers.ts";

function render(src: string): HTMLElement {
  const div = document.createElement("div");
  div.innerHTML = renderMarkdownToString(src, document);
  return div;
}

describe("markdown rendering", () => {
  test("formatting, inline code, lists, headings, quotes, tables", () => {
    const el = render(
      [
        "# Title",
        "",
        "Here is **bold text**, *emphasis*, ~~gone~~ and `inline code`.",
        "",
        "1. one",
        "2. two",
        "",
        "- a",
        "- b",
        "",
        "> quoted",
        "",
        "| left | right |",
        "|:-----|------:|",
        "| 1 | 2 |",
      ].join("\n"),
    );
    expect(el.querySelector("h1")?.textContent).toBe("Title");
    expect(el.querySelector("strong")?.textContent).toBe("bold text");
    expect(el.querySelector("em")?.textContent).toBe("emphasis");
    expect(el.querySelector("del")?.textContent).toBe("gone");
    expect(el.querySelector("p code")?.textContent).toBe("inline code");
    expect(Array.from(el.querySelectorAll("ol li"), (li) => li.textContent)).toEqual(["one", "two"]);
    expect(Array.from(el.querySelectorAll("ul li"), (li) => li.textContent)).toEqual(["a", "b"]);
    expect(el.querySelector("blockquote")?.textContent?.trim()).toBe("quoted");
    expect(Array.from(el.querySelectorAll("th"), (th) => [th.textContent, th.getAttribute("align")])).toEqual([
      ["left", "left"],
      ["right", "right"],
    ]);
  });

  test("a single newline is a line break; an ordered list keeps its start", () => {
    const el = render("line one\nline two\n\n3. three\n4. four");
    expect(el.querySelector("p")?.innerHTML).toBe("line one<br>line two");
    expect(el.querySelector("ol")?.getAttribute("start")).toBe("3");
  });

  test("links open in a new tab without opener or referrer; http(s) and mailto only", () => {
    const el = render("[our docs](https://example.com/help) [plain](http://example.com) [mail](mailto:a@example.com) https://auto.example.com/x");
    const links = Array.from(el.querySelectorAll("a"));
    expect(links.map((a) => a.getAttribute("href"))).toEqual(["https://example.com/help", "http://example.com", "mailto:a@example.com", "https://auto.example.com/x"]);
    for (const a of links) {
      expect(a.getAttribute("target")).toBe("_blank");
      expect(a.getAttribute("rel")).toBe("noopener noreferrer");
    }
  });

  test("relative and other-scheme links lose their href (the text stays)", () => {
    const el = render("[rel](/admin/) [frag](#x) [ftp](ftp://example.com/f) [tel](tel:123)");
    const links = Array.from(el.querySelectorAll("a"));
    expect(links.map((a) => a.textContent)).toEqual(["rel", "frag", "ftp", "tel"]);
    for (const a of links) {
      expect(a.hasAttribute("href")).toBe(false);
      expect(a.hasAttribute("target")).toBe(false);
    }
  });

  test("images are not loaded: a link to them instead", () => {
    const el = render("![a chart](https://example.com/chart.png) ![](https://example.com/pixel.gif)");
    expect(el.querySelector("img")).toBeNull();
    expect(Array.from(el.querySelectorAll("a"), (a) => [a.textContent, a.getAttribute("href")])).toEqual([
      ["a chart", "https://example.com/chart.png"],
      ["https://example.com/pixel.gif", "https://example.com/pixel.gif"],
    ]);
  });

  test("raw HTML in an answer is shown as text, not parsed (a bare <br> is a line break)", () => {
    const el = render("Use <b>bold</b> or <div class=\"chat-alert\">x</div>\n\n| a | b |\n|---|---|\n| 1<br>2 | 3 |");
    expect(el.querySelector("b")).toBeNull();
    expect(el.querySelector("div")).toBeNull();
    expect(el.textContent).toContain("<b>bold</b>");
    expect(el.textContent).toContain('<div class="chat-alert">x</div>');
    expect(el.querySelector("td")?.innerHTML).toBe("1<br>2");
  });

  test("code blocks are highlighted in known languages and escaped in others", () => {
    useHighlighter(highlightCode);
    const py = render("```python\ndef f(x):\n    return '<b>'\n```");
    const code = py.querySelector("pre > code");
    expect(code?.className).toBe("hljs language-python");
    expect(code?.querySelector(".hljs-keyword")?.textContent).toBe("def");
    expect(code?.textContent).toBe("def f(x):\n    return '<b>'");
    expect(py.querySelector("b")).toBeNull();

    const other = render("```brainfuck\n<script>alert(1)</script>\n```");
    expect(other.querySelector("pre > code")?.className).toBe("hljs language-brainfuck");
    expect(other.querySelector("pre > code")?.textContent).toBe("<script>alert(1)</script>");
    expect(other.querySelector("script")).toBeNull();
    expect(other.querySelector("pre span")).toBeNull();

    const bare = render("```\nplain\n```");
    expect(bare.querySelector("pre > code")?.className).toBe("hljs");
  });

  test("without a highlighter (the widget's panel) code is shown plain with the same classes", () => {
    useHighlighter(null);
    const py = render("```python\ndef f(x):\n    return '<b>'\n```");
    expect(py.querySelector("pre > code")?.className).toBe("hljs language-python");
    expect(py.querySelector("pre span")).toBeNull();
    expect(py.querySelector("pre > code")?.textContent).toBe("def f(x):\n    return '<b>'");
    expect(py.querySelector("b")).toBeNull();
    useHighlighter(highlightCode);
  });

  test("a code fence's info string cannot inject attributes", () => {
    const el = render('```"><img src=x onerror=alert(1)>\nx\n```\n\n```js" onmouseover="alert(1)\ny\n```');
    expect(dangerousNodes(el)).toEqual([]);
    for (const code of Array.from(el.querySelectorAll("code"))) expect(code.getAttributeNames().sort()).toEqual(["class"]);
  });

  test("task lists become read-only checkboxes", () => {
    const el = render("- [x] done\n- [ ] todo");
    const boxes = Array.from(el.querySelectorAll("input"));
    expect(boxes.map((b) => [b.getAttribute("type"), b.hasAttribute("disabled"), b.hasAttribute("checked")])).toEqual([
      ["checkbox", true, true],
      ["checkbox", true, false],
    ]);
  });
});

// Model output that tries to run script, load things, or restyle the page.
const XSS_PAYLOADS: [string, string][] = [
  ["script tag", "<script>window.__xss=1</script>"],
  ["script in a paragraph", "hello <script>alert(1)</script> world"],
  ["img onerror", '<img src=x onerror="alert(1)">'],
  ["svg onload", '<svg onload="alert(1)"></svg>'],
  ["iframe", '<iframe src="javascript:alert(1)"></iframe>'],
  ["iframe srcdoc", '<iframe srcdoc="<script>alert(1)</script>"></iframe>'],
  ["object/embed", '<object data="x.swf"></object><embed src="x.swf">'],
  ["style tag", "<style>body{display:none}</style>"],
  ["style attribute", '<p style="position:fixed;inset:0;background:red">cover</p>'],
  ["event handler on allowed tag", '<p onmouseover="alert(1)">hover me</p>'],
  ["html javascript link", '<a href="javascript:alert(1)">click</a>'],
  ["markdown javascript link", "[click](javascript:alert(1))"],
  ["mixed-case scheme", "[click](JaVaScRiPt:alert(1))"],
  ["scheme with a tab", "[click](java\tscript:alert(1))"],
  ["entity-encoded scheme", "[click](&#106;avascript:alert(1))"],
  ["hex-entity scheme", "[click](&#x6A;avascript:alert(1))"],
  ["autolink javascript", "<javascript:alert(1)>"],
  ["vbscript link", "[click](vbscript:msgbox(1))"],
  ["data link", "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)"],
  ["javascript image", "![x](javascript:alert(1))"],
  ["reference-style javascript link", "[click][r]\n\n[r]: javascript:alert(1)"],
  ["link title breakout", '[x](https://example.com "a\\" onmouseover=\\"alert(1))'],
  ["form and input", '<form action="https://evil.example"><input name="q"><button>go</button></form>'],
  ["meta refresh", '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">'],
  ["base tag", '<base href="javascript:alert(1)//">'],
  ["mXSS math/style", "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)></style></mglyph></table></mtext></math>"],
  ["noscript mXSS", '<noscript><p title="</noscript><img src=x onerror=alert(1)>">'],
  ["comment breakout", "<!--><img src=x onerror=alert(1)>-->"],
  ["heading with handler", '# <span onclick="alert(1)">hi</span>'],
  ["table cell handler", '| a |\n|---|\n| <td onclick="alert(1)">x</td> |'],
  ["code span is text", "`<img src=x onerror=alert(1)>`"],
  [
    "the end-to-end payload",
    "<img src=x onerror=\"window.__xss='img';alert('img')\"> <script>window.__xss='script';alert('script')</script> <a href=\"javascript:window.__xss='a';alert('a')\">click me</a> [markdown link](javascript:alert('md')) <svg onload=\"window.__xss='svg';alert('svg')\"></svg> <iframe src=\"javascript:alert('iframe')\"></iframe> <p onmouseover=\"alert('hover')\">hover me</p>",
  ],
];

describe("model output stays inert", () => {
  for (const [name, payload] of XSS_PAYLOADS) {
    test(name, () => {
      const el = render(payload);
      expect(dangerousNodes(el)).toEqual([]);
      for (const a of Array.from(el.querySelectorAll("a[href]"))) expect(a.getAttribute("href")).toMatch(/^(https?:|mailto:)/i);
      for (const node of Array.from(el.querySelectorAll("*"))) {
        for (const name of node.getAttributeNames()) expect(["href", "title", "class", "start", "align", "type", "checked", "disabled", "target", "rel"]).toContain(name);
      }
    });
  }

  test("the text of a refused tag is still readable", () => {
    const el = render('<a href="javascript:alert(1)">click me</a> and [md](javascript:alert(2))');
    expect(el.textContent).toContain("click me");
    expect(el.querySelector("a")?.textContent).toBe("md");
    expect(el.querySelector("a")?.hasAttribute("href")).toBe(false);
  });
});

describe("the sanitizer on its own (defence in depth behind marked)", () => {
  test("drops what marked would never produce", () => {
    const html = sanitizeToString(
      '<p onclick="x()" style="color:red" id="chat-log" class="chat-alert hljs-keyword">t</p><script>x()</script><img src=x onerror=x()><a href="javascript:x()">j</a><a href="https://ok.example">ok</a><iframe></iframe><span class="language-js evil">s</span>',
      document,
    );
    const div = document.createElement("div");
    div.innerHTML = html;
    expect(dangerousNodes(div)).toEqual([]);
    expect(div.querySelector("p")?.getAttributeNames()).toEqual(["class"]);
    expect(div.querySelector("p")?.className).toBe("hljs-keyword");
    expect(div.querySelector("span")?.className).toBe("language-js");
    const [bad, ok] = Array.from(div.querySelectorAll("a"));
    expect(bad?.hasAttribute("href")).toBe(false);
    expect(ok?.getAttribute("rel")).toBe("noopener noreferrer");
    expect(ok?.getAttribute("target")).toBe("_blank");
  });

  test("escapeHtml", () => {
    expect(escapeHtml(`<a href="x" title='y'>&</a>`)).toBe("&#60;a href=&#34;x&#34; title=&#39;y&#39;&#62;&#38;&#60;/a&#62;");
  });
});

describe("plain answers keep their text", () => {
  for (const text of [
    "You said: [[slow]] please tell me about returns shipping refunds",
    "Go to Settings > Security and choose 'Reset password'. We email you a link.",
    "You said: What are your opening hours on weekends?",
    "Price: 5 * 3 = 15, a_b_c, 2 < 3 > 1 & done",
  ]) {
    test(text, () => {
      expect(render(text).textContent).toBe(text);
    });
  }
});
