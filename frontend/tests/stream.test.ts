// @vitest-environment jsdom
import { describe, expect, test, vi } from "vitest";

import { renderMarkdownToString } from "../src/markdown.ts";
import { MarkdownBody, warmAnswerRendering } from "../src/stream.ts";
import { FakeFrames } from "./helpers.ts";

function setup() {
  const frames = new FakeFrames();
  const element = document.createElement("div");
  let rendered = 0;
  const body = new MarkdownBody(element, frames, () => rendered++);
  return { frames, element, body, rendered: () => rendered };
}

/** Split `text` into pieces of the given sizes (repeating), like a stream of deltas. */
function chunks(text: string, sizes: number[]): string[] {
  const out: string[] = [];
  let i = 0;
  let k = 0;
  while (i < text.length) {
    const n = sizes[k++ % sizes.length] ?? 1;
    out.push(text.slice(i, i + n));
    i += n;
  }
  return out;
}

const ANSWER = [
  "# Shipping",
  "",
  "We ship to **Norway** and *Sweden*.",
  "Delivery takes `3-5` days.",
  "",
  "1. Order online",
  "2. Pay",
  "   - card",
  "   - invoice",
  "",
  "```python",
  "def price(weight):",
  "    return 5 + weight * 2  # <b>",
  "```",
  "",
  "| Country | Days |",
  "|:--------|-----:|",
  "| Norway  | 3    |",
  "",
  "> Note: [terms](https://example.com/terms) apply. See [faq][f].",
  "",
  "[f]: https://example.com/faq",
  "",
  "<script>alert(1)</script> done",
].join("\n");

describe("streaming renderer", () => {
  test("the first text is rendered at once; later deltas within a frame are rendered once, at the frame", () => {
    const { frames, element, body, rendered } = setup();
    body.append("Hello");
    // the first token does not wait for an animation frame
    expect(frames.requests).toBe(0);
    expect(rendered()).toBe(1);
    expect(element.innerHTML).toBe("<p>Hello</p>");
    body.append(", ");
    body.append("world");
    expect(frames.requests).toBe(1);
    expect(element.textContent).toBe("Hello");
    expect(body.scheduled).toBe(true);
    frames.runFrame();
    expect(rendered()).toBe(2);
    expect(body.stats.renders).toBe(2);
    expect(element.innerHTML).toBe("<p>Hello, world</p>");
    expect(body.scheduled).toBe(false);

    body.append("!");
    expect(frames.requests).toBe(2);
    frames.runFrame();
    expect(element.textContent).toBe("Hello, world!");
    expect(rendered()).toBe(3);
  });

  test("blank text before the first token waits for a frame like any delta", () => {
    const { frames, element, body, rendered } = setup();
    body.append("\n\n");
    expect(frames.requests).toBe(1);
    expect(rendered()).toBe(0);
    body.append("Hi");
    expect(rendered()).toBe(1); // the first visible text: at once
    expect(element.textContent).toBe("Hi");
    expect(body.scheduled).toBe(false);
  });

  test("an empty delta schedules nothing; a frame with nothing new renders nothing", () => {
    const { frames, body } = setup();
    body.append("");
    expect(frames.requests).toBe(0);
    body.append("a"); // the first text: rendered at once
    body.append("b");
    frames.runFrame();
    body.set("ab");
    expect(frames.requests).toBe(1);
    frames.runFrame();
    expect(body.stats.renders).toBe(2);
  });

  test("finished blocks keep their nodes; only the growing block is rendered again", () => {
    const { frames, element, body } = setup();
    body.append("First paragraph.\n\n");
    frames.runFrame();
    const first = element.querySelector("p");
    expect(first?.textContent).toBe("First paragraph.");

    body.append("Second");
    frames.runFrame();
    const before = body.stats.blocksRendered;
    for (const word of [" para", "graph", " grows", "."]) {
      body.append(word);
      frames.runFrame();
    }
    const ps = element.querySelectorAll("p");
    expect(ps.length).toBe(2);
    expect(ps[0]).toBe(first); // the same node, never replaced
    expect(ps[1]?.textContent).toBe("Second paragraph grows.");
    // Each of the 4 frames rendered only the growing paragraph (plus nothing else).
    expect(body.stats.blocksRendered - before).toBe(4);
  });

  test("a selection inside a finished block survives the stream", () => {
    const { frames, element, body } = setup();
    document.body.appendChild(element);
    body.append("Select me please.\n\nmore");
    frames.runFrame();
    const text = element.querySelector("p")?.firstChild;
    expect(text).toBeTruthy();
    const range = document.createRange();
    range.setStart(text as Node, 0);
    range.setEnd(text as Node, 6);
    const sel = document.getSelection();
    sel?.removeAllRanges();
    sel?.addRange(range);
    body.append(" text arrives");
    frames.runFrame();
    expect(document.getSelection()?.toString()).toBe("Select");
    element.remove();
  });

  test("whatever the chunking, the final DOM equals a full render of the whole text", () => {
    const expected = renderMarkdownToString(ANSWER, document);
    for (const sizes of [[1], [2, 3], [7], [13, 1, 40], [ANSWER.length]]) {
      const { frames, element, body } = setup();
      const pieces = chunks(ANSWER, sizes);
      pieces.forEach((piece, i) => {
        body.append(piece);
        if (i % 5 === 0) frames.runFrame();
      });
      body.flush();
      expect(element.innerHTML, `chunk sizes ${sizes.join(",")}`).toBe(expected);
      expect(element.querySelector("script")).toBeNull();
    }
    const whole = setup();
    whole.body.set(ANSWER);
    whole.body.flush();
    expect(whole.element.innerHTML).toBe(expected);
    expect(whole.element.querySelector("h1")?.textContent).toBe("Shipping");
    expect(whole.element.querySelectorAll("a[href]").length).toBe(2);
  }, 30_000);

  // Markdown whose blocks change kind, merge or split as text arrives.
  const TRICKY: [string, string][] = [
    ["setext headings and rules", "Title\n=====\n\nText\nmore\n---\n\n***\n\nLast line"],
    ["loose lists and continuations", "- a\n\n- b\n\n  continued\n\n1. x\n2. y\n\n   z\n\nafter\n- c\n- d"],
    ["HTML blocks across blank lines", "<pre>\n\ncode\n</pre>\n\ntext <div>\n\nx\n</div>\n\n<!-- c\n\nd -->\nend"],
    ["quotes with lazy lines and nesting", "> quote\ncontinued lazy\n> - item\n\n>> nested\n\nout"],
    ["a growing table", "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\nafter"],
    ["indented code", "para\n\n    code\n    more\n\n    still\npara2"],
    ["reference definitions in the middle", "[a][x] and [b][y]\n\n[x]: https://x.example\n\ntext [b][y]\n\n[y]: https://y.example \"T\"\n\n[x][]"],
    ["code fences with blank lines", "```\na\n\n\nb\n```\n\n~~~py\nx = 1\n\n~~~\nafter"],
    ["inline spans across deltas", "**bold** and _it_ ~~del~~ `co de` <https://auto.example> www.example.com [l](https://l.example)"],
  ];

  for (const [name, doc] of TRICKY) {
    test(`after every frame the body equals a full render of the text so far: ${name}`, () => {
      for (const sizes of [[1], [3, 1], [5]]) {
        const { frames, element, body } = setup();
        for (const piece of chunks(doc, sizes)) {
          body.append(piece);
          frames.runFrame();
          expect(element.innerHTML, `${JSON.stringify(body.text)} (chunks ${sizes.join(",")})`).toBe(renderMarkdownToString(body.text, document));
        }
      }
    }, 30_000);
  }

  test("random markdown, random deltas: after every frame the body equals a full render", () => {
    // A small seeded generator (mulberry32), so a failure can be reproduced.
    let seed = 20261129;
    const rand = () => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
    const LINES = ["", "", "", "text **b** and _i_", "more text", "- item", "* star", "1. one", "2. two", "10) ten", "  indented", "    code", "```", "```py", "~~~", "> quote", ">> deep", "| a | b |", "|---|:-:|", "| 1 | 2 |", "[r]: https://r.example", "[r] and [x][r]", "<div>", "</div>", "<pre>", "</pre>", "<!-- c", "-->", "===", "---", "***", "# h", "Title", "- [ ] task", "text<br>more", "    - nested"];
    for (let doc = 0; doc < 25; doc++) {
      const text = Array.from({ length: 4 + Math.floor(rand() * 14) }, () => pick(LINES)).join("\n");
      const { frames, element, body } = setup();
      let i = 0;
      while (i < text.length) {
        const n = 1 + Math.floor(rand() * 6);
        body.append(text.slice(i, i + n));
        i += n;
        frames.runFrame();
        expect(element.innerHTML, `doc ${doc}: ${JSON.stringify(body.text)}`).toBe(renderMarkdownToString(body.text, document));
      }
    }
  }, 120_000);

  test("a long answer is not lexed again from the start at every frame", () => {
    const { frames, body } = setup();
    const text = ANSWER.repeat(8);
    const pieces = chunks(text, [8]);
    for (const piece of pieces) {
      body.append(piece);
      frames.runFrame();
    }
    // Lexing the whole text at each frame would be text.length / 2 characters a frame on
    // average (about 2,400 here); only the unfinished blocks are: a few lines.
    const perFrame = body.stats.charsLexed / pieces.length;
    expect(perFrame).toBeLessThan(120);
    expect(body.text).toBe(text);
  }, 30_000);

  test("a reference definition arriving later re-renders the blocks that use it", () => {
    const { frames, element, body } = setup();
    body.append("See [the faq][f].\n\n");
    frames.runFrame();
    expect(element.querySelector("a")).toBeNull();
    body.append("[f]: https://example.com/faq\n");
    frames.runFrame();
    expect(element.querySelector("a")?.getAttribute("href")).toBe("https://example.com/faq");
  });

  test("flush renders now and cancels the pending frame", () => {
    const { frames, element, body } = setup();
    body.append("**done**");
    body.flush();
    expect(element.innerHTML).toBe("<p><strong>done</strong></p>");
    expect(frames.pending).toBe(0);
    body.flush();
    expect(body.stats.renders).toBe(1);
  });

  test("set replaces the text (a snapshot); clear empties the body", () => {
    const { frames, element, body } = setup();
    body.append("partial answ");
    frames.runFrame();
    body.set("The whole answer, from the server.");
    frames.runFrame();
    expect(element.textContent).toBe("The whole answer, from the server.");
    expect(body.text).toBe("The whole answer, from the server.");
    body.append("x");
    body.clear();
    expect(element.childNodes.length).toBe(0);
    expect(body.text).toBe("");
    expect(frames.pending).toBe(0);
    body.append("again");
    frames.runFrame();
    expect(element.textContent).toBe("again");
  });

  test("an unfinished code fence renders as code while it streams", () => {
    const { frames, element, body } = setup();
    body.append("```js\nconst a = 1;\n");
    frames.runFrame();
    expect(element.querySelector("pre code.language-js")?.textContent).toContain("const a = 1;");
    body.append("```\n\nAfter.");
    frames.runFrame();
    expect(element.querySelector("p")?.textContent).toBe("After.");
  });
});

describe("warming the renderer", () => {
  test("renders into nothing the page shows, and leaves no timer behind", () => {
    document.body.innerHTML = '<main id="chat-log"><p>Hello</p></main>';
    const before = document.body.innerHTML;
    vi.useFakeTimers();
    try {
      warmAnswerRendering(document);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
    expect(document.body.innerHTML).toBe(before);
  });
});
