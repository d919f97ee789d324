"""How many frames one chat socket may send: token buckets, one per socket.

Every frame costs a little (parsing, a database or Redis round trip), and a `chat.resume` of
~120 bytes may replay a whole answer log, so a socket gets a general frame budget and a
separate, smaller one for resumes. A `chat.draft` queues a prefill of the whole conversation on
a worker, so drafts have a smaller one too (a draft past it is dropped, not refused: it is a
hint, and the page waits for no reply). The defaults sit far above what a person typing, a
reconnect (one resume per socket) or feedback clicks produce; they only stop a script.

Pure and synchronous: the caller passes the clock (`time.monotonic()`), so tests need no sleep.
A refused frame costs nothing, so waiting the returned retry-after is always enough.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

# Every frame is charged as FRAME when it arrives, before it is parsed; a chat.resume is
# charged again as RESUME once its type is known.
FRAME = "frame"
RESUME = "chat.resume"
DRAFT = "chat.draft"


@dataclass
class TokenBucket:
    """`burst` tokens, refilled at `rate` per second; a rate of 0 means no limit."""

    rate: float
    burst: int
    _tokens: float = field(init=False)
    _last: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._tokens = float(self.burst)

    def take(self, now: float) -> float | None:
        """Spend one token: None when allowed, else the seconds until one is there."""
        if self.rate <= 0:
            return None
        if self._last is not None:
            # max(0, ...): a clock that steps back must not mint tokens
            elapsed = max(0.0, now - self._last)
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate)
        if self._last is None or now > self._last:
            self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return None
        return (1.0 - self._tokens) / self.rate


class FrameBudget:
    """One socket's budget: `take(kind=FRAME, ...)` for every frame, then
    `take(kind=RESUME, ...)` for a `chat.resume`."""

    def __init__(
        self,
        *,
        frames_per_s: float,
        burst: int,
        resumes_per_s: float,
        resume_burst: int,
        drafts_per_s: float = 0.5,
        draft_burst: int = 3,
    ) -> None:
        for name, rate, burst_name, size in (
            ("frames_per_s", frames_per_s, "burst", burst),
            ("resumes_per_s", resumes_per_s, "resume_burst", resume_burst),
            ("drafts_per_s", drafts_per_s, "draft_burst", draft_burst),
        ):
            if rate < 0:
                raise ValueError(f"{name} must be >= 0 (0: no limit), got {rate}")
            if size < 1:
                raise ValueError(f"{burst_name} must be >= 1, got {size}")
        self._buckets = {
            FRAME: TokenBucket(rate=frames_per_s, burst=burst),
            RESUME: TokenBucket(rate=resumes_per_s, burst=resume_burst),
            DRAFT: TokenBucket(rate=drafts_per_s, burst=draft_burst),
        }

    @classmethod
    def from_settings(cls) -> FrameBudget:
        return cls(
            frames_per_s=float(settings.CHAT_SOCKET_FRAMES_PER_S),
            burst=int(settings.CHAT_SOCKET_FRAME_BURST),
            resumes_per_s=float(settings.CHAT_SOCKET_RESUMES_PER_S),
            resume_burst=int(settings.CHAT_SOCKET_RESUME_BURST),
            drafts_per_s=float(settings.CHAT_SOCKET_DRAFTS_PER_S),
            draft_burst=int(settings.CHAT_SOCKET_DRAFT_BURST),
        )

    def take(self, *, kind: str, now: float) -> float | None:
        """None when the frame may go on; else the retry-after in seconds (frame refused)."""
        bucket = self._buckets.get(kind)
        if bucket is None:
            raise ValueError(f"kind must be one of {sorted(self._buckets)}, got {kind!r}")
        return bucket.take(now)
