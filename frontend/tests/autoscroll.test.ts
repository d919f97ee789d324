import { describe, expect, test } from "vitest";

import { AutoScroller, type ScrollBox } from "../src/autoscroll.ts";

/** A scrolling box with a layout: content height, view height, clamped scrollTop; scroll events on demand. */
class FakeBox implements ScrollBox {
  private top = 0;
  private listener: (() => void) | null = null;
  constructor(
    public scrollHeight: number,
    readonly clientHeight: number,
  ) {}
  get scrollTop(): number {
    return this.top;
  }
  set scrollTop(v: number) {
    this.top = Math.max(0, Math.min(v, this.scrollHeight - this.clientHeight));
  }
  addEventListener(_type: "scroll", listener: () => void): void {
    this.listener = listener;
  }
  /** The user scrolls to `top` (the browser then fires scroll). */
  userScrollTo(top: number): void {
    this.scrollTop = top;
    this.listener?.();
  }
  /** The browser fires the scroll event of a programmatic scroll. */
  fireScroll(): void {
    this.listener?.();
  }
  /** More content below (an answer grows): no scroll event. */
  grow(px: number): void {
    this.scrollHeight += px;
  }
  /** Content removed: the browser clamps scrollTop and fires scroll. */
  shrink(px: number): void {
    this.scrollHeight -= px;
    const before = this.top;
    this.scrollTop = this.top;
    if (this.top !== before) this.listener?.();
  }
  get atBottom(): boolean {
    return this.top === this.scrollHeight - this.clientHeight;
  }
}

describe("auto-scroll", () => {
  test("follows the stream while at the bottom", () => {
    const box = new FakeBox(1000, 400);
    const s = new AutoScroller(box);
    s.jumpToBottom();
    expect(box.scrollTop).toBe(600);
    for (let i = 0; i < 5; i++) {
      box.grow(30);
      s.contentChanged();
      box.fireScroll();
      expect(box.atBottom).toBe(true);
      expect(s.following).toBe(true);
    }
  });

  test("stops when the user scrolls up, even by a little", () => {
    const box = new FakeBox(1000, 400);
    const s = new AutoScroller(box);
    s.jumpToBottom();
    box.userScrollTo(590);
    expect(s.following).toBe(false);
    box.grow(100);
    s.contentChanged();
    expect(box.scrollTop).toBe(590); // left where the user put it
    box.userScrollTo(300);
    box.grow(100);
    s.contentChanged();
    expect(box.scrollTop).toBe(300);
    expect(s.following).toBe(false);
  });

  test("resumes when the user scrolls back down to the end (within the threshold)", () => {
    const box = new FakeBox(1000, 400);
    const s = new AutoScroller(box, 32);
    s.jumpToBottom();
    box.userScrollTo(200);
    box.grow(200); // end is now at 800
    s.contentChanged();
    box.userScrollTo(700); // 100 px above the end: not yet
    expect(s.following).toBe(false);
    box.userScrollTo(780); // 20 px above the end: close enough
    expect(s.following).toBe(true);
    box.grow(50);
    s.contentChanged();
    expect(box.atBottom).toBe(true);
  });

  test("growing content alone never stops the following", () => {
    const box = new FakeBox(400, 400); // nothing to scroll yet
    const s = new AutoScroller(box);
    box.grow(1000);
    s.contentChanged();
    box.fireScroll();
    expect(s.following).toBe(true);
    expect(box.atBottom).toBe(true);
  });

  test("content removed under a following view keeps it following", () => {
    const box = new FakeBox(2000, 400);
    const s = new AutoScroller(box);
    s.jumpToBottom();
    box.shrink(500); // e.g. an answer emptied to stream again
    expect(s.following).toBe(true);
    box.grow(100);
    s.contentChanged();
    expect(box.atBottom).toBe(true);
  });

  test("jumpToBottom (the user sent something) follows again", () => {
    const box = new FakeBox(1000, 400);
    const s = new AutoScroller(box);
    s.jumpToBottom();
    box.userScrollTo(0);
    expect(s.following).toBe(false);
    box.grow(100);
    s.jumpToBottom();
    expect(s.following).toBe(true);
    expect(box.atBottom).toBe(true);
  });

  test("distance from the bottom", () => {
    const box = new FakeBox(1000, 400);
    const s = new AutoScroller(box);
    expect(s.distanceFromBottom()).toBe(600);
    box.userScrollTo(550);
    expect(s.distanceFromBottom()).toBe(50);
  });
});
