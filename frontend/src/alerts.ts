// `#chat-alert` (`role="alert"`): one message at a time; a "busy" error with a retry-after
// counts its seconds down and then clears.

export class AlertBanner {
  private countdown: ReturnType<typeof setInterval> | null = null;

  constructor(private readonly el: HTMLElement) {}

  show(message: string): void {
    this.stopCountdown();
    this.el.textContent = message;
    this.el.hidden = false;
  }

  clear(): void {
    this.stopCountdown();
    this.el.textContent = "";
    this.el.hidden = true;
  }

  /** A chat.error for the user: its message (or code), counted down if it has a retry-after. */
  showError(f: { code: string; message: string; retry_after_s: number | null }): void {
    const message = f.message || `Error: ${f.code}`;
    if (f.retry_after_s !== null && f.retry_after_s > 0) this.showCountdown(message, f.retry_after_s);
    else this.show(message);
  }

  /**
   * The message (announced once: the alert is `role="alert"`) and the seconds left, counted
   * down in a `role="timer"` span (not announced at each tick); `data-retry-in` on the alert
   * holds the seconds. Then the alert clears.
   */
  showCountdown(message: string, seconds: number): void {
    this.show(message);
    const alert = this.el;
    const timer = alert.ownerDocument.createElement("span");
    timer.className = "alert-countdown";
    timer.setAttribute("role", "timer");
    timer.setAttribute("aria-live", "off");
    alert.append(" ", timer);
    let left = Math.ceil(seconds);
    const render = () => {
      timer.textContent = `(${left} s)`;
      alert.dataset["retryIn"] = String(left);
    };
    render();
    this.countdown = setInterval(() => {
      left -= 1;
      if (left > 0) render();
      else this.clear();
    }, 1000);
  }

  private stopCountdown(): void {
    if (this.countdown !== null) clearInterval(this.countdown);
    this.countdown = null;
    delete this.el.dataset["retryIn"];
  }
}
