// Keeps the chat log scrolled to the bottom while an answer streams, but only while the user
// is at the bottom: scrolling up stops the following, scrolling back down (to within
// `threshold` px of the end) resumes it.
//
// Only the direction of a scroll tells a user's scroll from a growing answer: content growth
// never moves scrollTop up, and our own scrolls only move it down. So a scroll event that moved
// up (and does not end at the very bottom) means the user left the bottom.

/** The part of an element the scroller reads and writes. */
export interface ScrollBox {
  scrollTop: number;
  readonly scrollHeight: number;
  readonly clientHeight: number;
  addEventListener(type: "scroll", listener: () => void, options?: AddEventListenerOptions): void;
}

export const FOLLOW_THRESHOLD_PX = 32;

export class AutoScroller {
  /** Whether the log follows new content. */
  following = true;
  private lastTop: number;

  constructor(
    private readonly box: ScrollBox,
    private readonly threshold = FOLLOW_THRESHOLD_PX,
  ) {
    this.lastTop = box.scrollTop;
    box.addEventListener("scroll", () => this.onScroll(), { passive: true });
  }

  /** Distance between the bottom of the view and the end of the content, in px. */
  distanceFromBottom(): number {
    const b = this.box;
    return Math.max(0, b.scrollHeight - b.scrollTop - b.clientHeight);
  }

  onScroll(): void {
    const top = this.box.scrollTop;
    const distance = this.distanceFromBottom();
    if (top < this.lastTop - 1 && distance > 1) this.following = false;
    else if (distance <= this.threshold) this.following = true;
    this.lastTop = top;
  }

  /** New content was rendered: keep showing the end if following. */
  contentChanged(): void {
    if (this.following) this.scrollToBottom();
  }

  /** Show the end and follow again (the user sent something, or the page loaded). */
  jumpToBottom(): void {
    this.following = true;
    this.scrollToBottom();
  }

  private scrollToBottom(): void {
    const b = this.box;
    b.scrollTop = b.scrollHeight;
    this.lastTop = b.scrollTop;
  }
}
