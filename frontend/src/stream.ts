// The body of an answer while it streams: deltas are collected and rendered as markdown at
// most once per animation frame, into the same element, touching only what changed.
//
// Markdown decides where a block ends line by line, looking at most a line ahead: once a later
// block is under way and two more lines are complete, the blocks before are closed for good
// (see markFinished). Those finished blocks keep their DOM nodes
// (no flicker, a selection in them survives) and are not lexed again: each frame lexes the
// text from the first unfinished block on, compares the blocks with those on screen by their
// source, and replaces only the changed ones (in practice: the growing last block). A new or
// changed reference definition (`[x]: url`) can change any block, so it makes that frame
// render everything again; and flush (the end of the answer) checks the whole text, so the
// final DOM is exactly a full render.

import type { Links, Token } from "marked";

import { lexBlocks, renderBlocks } from "./markdown.ts";

/** Runs a callback before the next paint; requestAnimationFrame in the browser. */
export interface FrameScheduler {
  request(callback: () => void): unknown;
  cancel(handle: unknown): void;
}

export const animationFrames: FrameScheduler = {
  request: (callback) => requestAnimationFrame(() => callback()),
  cancel: (handle) => cancelAnimationFrame(handle as number),
};

/** A scheduler for environments without requestAnimationFrame: a macrotask. */
export const timeoutFrames: FrameScheduler = {
  request: (callback) => setTimeout(callback, 16),
  cancel: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export function defaultScheduler(): FrameScheduler {
  return typeof requestAnimationFrame === "function" ? animationFrames : timeoutFrames;
}

interface RenderedBlock {
  token: Token;
  nodes: Node[];
}

export interface RenderStats {
  /** Renders that changed something. */
  renders: number;
  /** Blocks rendered (a block rendered again counts again). */
  blocksRendered: number;
  /** Characters lexed (the whole text at a full render, the unfinished part otherwise). */
  charsLexed: number;
}

export class MarkdownBody {
  private source = "";
  private blocks: RenderedBlock[] = [];
  /** Every reference definition in the text at the last render. */
  private links: Links = {};
  /** How many blocks are finished, and where the first unfinished one starts in `source`. */
  private finished = 0;
  private finishedEnd = 0;
  private pending: unknown = null;
  private dirty = false;
  readonly stats: RenderStats = { renders: 0, blocksRendered: 0, charsLexed: 0 };

  /**
   * @param element where the answer is rendered (`.message-body`); nothing else writes to it
   * @param onRender called after each render (e.g. to keep the log scrolled to the bottom)
   */
  constructor(
    readonly element: HTMLElement,
    private readonly scheduler: FrameScheduler = defaultScheduler(),
    private readonly onRender: (() => void) | null = null,
  ) {}

  /** The markdown received so far. */
  get text(): string {
    return this.source;
  }

  /** Whether text is waiting for the next frame. */
  get scheduled(): boolean {
    return this.pending !== null;
  }

  /**
   * Add a delta; it is shown at the next frame, together with every delta until then. The
   * answer's first text is rendered at once: waiting for an animation frame would add up to a
   * frame (16.7 ms at 60 Hz) to the time to first token; batching is for the deltas after it.
   */
  append(delta: string): void {
    if (delta === "") return;
    const first = this.source.trim() === "";
    this.source += delta;
    if (first && this.source.trim() !== "") {
      this.flushNow();
      return;
    }
    this.markDirty();
  }

  /** Replace the whole text (a snapshot); shown at the next frame. */
  set(text: string): void {
    if (text === this.source) return;
    // Only an extension of the text keeps the finished blocks finished.
    if (!text.startsWith(this.source.slice(0, this.finishedEnd))) this.finished = this.finishedEnd = 0;
    this.source = text;
    this.markDirty();
  }

  /** Render now, checking the whole text (the answer ended, or a finished answer is shown). */
  flush(): void {
    if (this.pending !== null) {
      this.scheduler.cancel(this.pending);
      this.pending = null;
    }
    this.dirty = false;
    this.render(true);
  }

  /** Empty the body (the answer is generated again into this message). */
  clear(): void {
    if (this.pending !== null) this.scheduler.cancel(this.pending);
    this.pending = null;
    this.dirty = false;
    this.source = "";
    this.blocks = [];
    this.links = {};
    this.finished = this.finishedEnd = 0;
    this.element.replaceChildren();
  }

  /** Render what is pending now (a partial render: finished blocks stay as they are). */
  private flushNow(): void {
    if (this.pending !== null) {
      this.scheduler.cancel(this.pending);
      this.pending = null;
    }
    this.dirty = false;
    this.render(false);
  }

  private markDirty(): void {
    this.dirty = true;
    if (this.pending !== null) return;
    this.pending = this.scheduler.request(() => {
      this.pending = null;
      if (this.dirty) {
        this.dirty = false;
        this.render(false);
      }
    });
  }

  private render(full: boolean): void {
    let first = full ? 0 : this.finished;
    let lexed = lexBlocks(this.source.slice(first === 0 ? 0 : this.finishedEnd), first === 0 ? null : definitions(this.blocks, first));
    if (first > 0 && !sameLinks(lexed.links, this.links)) {
      first = 0;
      lexed = lexBlocks(this.source);
    }
    this.stats.charsLexed += this.source.length - (first === 0 ? 0 : this.finishedEnd);
    const next = lexed.blocks;
    // New or changed reference definitions: any block may use them, so all are rendered again.
    const same = !sameLinks(lexed.links, this.links) ? 0 : first + commonPrefix(this.blocks.slice(first), next);
    this.links = { ...lexed.links };
    const changed = same < this.blocks.length || first + next.length > this.blocks.length;
    if (changed) {
      for (const old of this.blocks.splice(same)) for (const n of old.nodes) n.parentNode?.removeChild(n);
      const doc = this.element.ownerDocument;
      for (const token of next.slice(same - first)) {
        const fragment = renderBlocks([token], doc);
        // Not the newlines marked puts between blocks: the body holds just the blocks.
        const nodes = Array.from(fragment.childNodes).filter((n) => n.nodeType !== 3 || (n.textContent ?? "").trim() !== "");
        this.element.append(...nodes);
        this.blocks.push({ token, nodes });
        this.stats.blocksRendered += 1;
      }
    }
    this.markFinished();
    if (changed) {
      this.stats.renders += 1;
      this.onRender?.();
    }
  }

  /**
   * Which blocks are finished. Markdown may decide where a block ends only a line later (a
   * setext underline, a table's delimiter row, a definition's title), so block k and those
   * after it may still change unless (a) a later block that is not blank space has a complete
   * first line and (b) two complete lines follow the start of block k. The blocks before the
   * last k that passes both are finished.
   */
  private markFinished(): void {
    const starts: number[] = [];
    let offset = 0;
    for (const { token } of this.blocks) {
      starts.push(offset);
      offset += token.raw.length;
    }
    let finished = 0;
    let nextContentStart = -1;
    for (let k = this.blocks.length - 1; k >= 1; k--) {
      const start = starts[k] as number;
      if ((this.blocks[k] as RenderedBlock).token.type !== "space") nextContentStart = start;
      if (nextContentStart < 0 || this.source.indexOf("\n", nextContentStart) < 0) continue;
      const first = this.source.indexOf("\n", start);
      if (first >= 0 && this.source.indexOf("\n", first + 1) >= 0) {
        finished = k;
        break;
      }
    }
    this.finished = finished;
    this.finishedEnd = starts[finished] ?? 0;
  }
}

/** The reference definitions of the first `count` blocks (the first definition of a name wins). */
function definitions(blocks: readonly RenderedBlock[], count: number): Links {
  const links: Links = {};
  for (const { token } of blocks.slice(0, count)) {
    if (token.type === "def" && !(token.tag in links)) links[token.tag] = { href: token.href, title: token.title };
  }
  return links;
}

function sameLinks(a: Links, b: Links): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => a[k]?.href === b[k]?.href && a[k]?.title === b[k]?.title);
}

function commonPrefix(shown: readonly RenderedBlock[], next: readonly Token[]): number {
  const n = Math.min(shown.length, next.length);
  let i = 0;
  while (i < n && shown[i]?.token.raw === next[i]?.raw && shown[i]?.token.type === next[i]?.type) i++;
  return i;
}

// Markdown of the kinds answers have, for warmAnswerRendering.
const WARM_UP_ANSWER = "Hi **there**, see `this` and [a link](https://example.com).\n\n- one\n- two\n\n1. first\n\n> quoted\n\n```\ncode\n```\n";

/**
 * Render a sample answer once into a detached element, so that the first real answer's first
 * token is shown without paying for compiling the renderer and setting up the sanitizer: about
 * 10 ms in a new browser context (a website visitor's panel; bench/notes/2026-12-07-widget.md).
 */
export function warmAnswerRendering(doc: Document): void {
  const body = new MarkdownBody(doc.createElement("div"), timeoutFrames);
  body.append(WARM_UP_ANSWER);
  body.flush();
}

/** Run `work` when the page is idle (soon, in any case). */
export function whenIdle(work: () => void): void {
  if (typeof requestIdleCallback === "function") requestIdleCallback(() => work(), { timeout: 200 });
  else setTimeout(work, 0);
}
