"""The web process's own settings, declared once with their types, defaults and bounds.

Read from the environment (`CHAT_*`, `LOGIN_*`) by pydantic-settings when the settings module
loads; a value that is not a number, or out of its bounds, stops start-up with an
ImproperlyConfigured naming the variable, instead of failing later mid-answer. `base.py`
exposes each field as the Django setting of the same upper-case name (`settings.CHAT_...`), so
code and tests keep using Django's one settings object.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class ChatSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CHAT_", frozen=True, extra="ignore")

    # Chat limits (docs/protocol.md)
    max_frame_bytes: int = Field(65536, ge=1024)
    max_message_chars: int = Field(8000, ge=1)
    # The worker fits the history to the model's context by tokens; this bounds what is sent.
    history_max_messages: int = Field(200, ge=2)
    accept_timeout_s: float = Field(30, gt=0)
    # Past the accept timeout a request still waits while live workers are busy, up to this.
    queue_timeout_s: float = Field(120, gt=0)
    # No event (delta or the worker's heartbeat) for this long after the worker accepted: the
    # worker is taken as lost and the answer fails with what it had.
    stall_timeout_s: float = Field(10, gt=0)
    # An answer a worker started that has no first token after this long fails `timeout`
    # (a prefill that long is a prompt the hardware cannot serve in time); 0: no bound.
    first_token_timeout_s: float = Field(120, ge=0)
    # A socket that drops leaves its answer generating this long, so a refresh can resume it;
    # nobody back by then: the generation is aborted and the answer kept as stopped.
    disconnect_grace_s: float = Field(30, ge=0)
    # How long a run's stream log stays resumable after its last entry (Redis stream TTL).
    answer_log_ttl_s: float = Field(3600, gt=0)
    # The relay owning a run tells watchers, the log and admission it is alive this often; a
    # run whose owner is silent for reap_after_s is orphaned (its web process died): whoever
    # finds it (a resuming socket, the API request watching it, the reaper of any web process
    # every reap_every_s) ends it from its log, frees its lease and cancels its worker request.
    relay_heartbeat_s: float = Field(2, gt=0)
    reap_after_s: float = Field(0, ge=0)  # 0: max(5, 4 heartbeats)
    reap_every_s: float = Field(5, gt=0)
    # Admission control (docs/operations.md): past these the user gets "busy" with a retry-after.
    user_max_concurrent: int = Field(3, ge=1)
    user_rate: int = Field(30, ge=1)
    user_rate_window_s: float = Field(60, gt=0)
    # An admitted run's lease; its owner renews it every heartbeat, so a dead owner's slots
    # come back this long after its last heartbeat even if nobody ends its runs.
    admission_lease_s: float = Field(0, ge=0)  # 0: max(10, 5 heartbeats)
    busy_retry_after_s: float = Field(5, ge=0)
    # A streamed /v1 answer sends an SSE comment this often until its first token.
    sse_keepalive_s: float = Field(10, gt=0)
    # The page tells the server what the user types (chat.draft) and a worker prefills it.
    typing_prefill: bool = True
    # Routing affinity (inference/wire/affinity.py): a conversation's next turn goes to the worker
    # that served its last one (its history is in that engine's prefix cache) while that
    # worker is alive with a free slot; one it has not taken within affinity_wait_s goes to any
    # worker. The conversation -> worker map lives affinity_ttl_s after each turn.
    affinity: bool = True
    affinity_wait_s: float = Field(1.0, gt=0)
    affinity_ttl_s: float = Field(3600, gt=0)
    # An answer whose worker dies mid-answer goes on on another worker from the text already
    # streamed, at most this many times (0: it fails `worker_lost`).
    max_migrations: int = Field(2, ge=0)
    # Answer standalone questions from approved FAQ entries before the model.
    faq_enabled: bool = True
    # An FAQ entry whose answers got this many thumbs-down within the window stops answering
    # until an admin looks at it (0: never).
    faq_thumbs_down_limit: int = Field(3, ge=0)
    faq_thumbs_down_window_s: float = Field(7 * 86400, gt=0)
    max_tokens: int = Field(0, ge=0)  # 0: the template's, else the model's default
    warmup_timeout_s: float = Field(60, gt=0)
    # Per-socket frame budget (chatapp/realtime/frame_budget.py); 0: no limit. A chat.resume
    # may replay a whole answer log, so it has its own smaller budget.
    socket_frames_per_s: float = Field(5, ge=0)
    socket_frame_burst: int = Field(20, ge=1)
    socket_resumes_per_s: float = Field(0.2, ge=0)
    socket_resume_burst: int = Field(3, ge=1)
    # chat.draft (typing prefill) frames: a person pausing while typing sends one every few
    # seconds; past this they are dropped (a hint: nothing is lost)
    socket_drafts_per_s: float = Field(0.5, ge=0)
    socket_draft_burst: int = Field(3, ge=1)
    # ... and one user's drafts over all sockets and web processes: at most one per this long
    # (0: no limit), so many tabs or sockets cannot fill the workers with prefills
    user_draft_every_s: float = Field(1.0, ge=0)

    # TLS (and with it HTTP/2, negotiated by ALPN) on `manage.py serve`'s own port: a PEM
    # certificate chain and its private key; both or neither (docs/operations.md, "HTTP/2").
    tls_cert_file: str = ""
    tls_key_file: str = ""

    @model_validator(mode="after")
    def _tls_pair(self) -> ChatSettings:
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("CHAT_TLS_CERT_FILE and CHAT_TLS_KEY_FILE must be set together")
        return self

    @model_validator(mode="after")
    def _liveness_bounds(self) -> ChatSettings:
        heartbeat = self.relay_heartbeat_s
        if not self.reap_after_s:
            object.__setattr__(self, "reap_after_s", max(5.0, 4 * heartbeat))
        if not self.admission_lease_s:
            object.__setattr__(self, "admission_lease_s", max(10.0, 5 * heartbeat))
        # Fewer than two heartbeats would take a live owner that is a moment late for dead.
        for name in ("reap_after_s", "admission_lease_s"):
            if getattr(self, name) < 2 * heartbeat:
                raise ValueError(
                    f"CHAT_{name.upper()} must be at least two CHAT_RELAY_HEARTBEAT_S "
                    f"({2 * heartbeat:g} s)"
                )
        return self


class LoginSettings(BaseSettings):
    """Login throttling (django-axes, chatapp/web/login_throttle.py): `failure_limit` failed
    logins of one username, or from one client address, lock it for `cooloff_s`. Behind reverse
    proxies set `throttle_proxy_count` (how many append to X-Forwarded-For), or every client has
    the proxy's address and one address's limit locks everybody out."""

    model_config = SettingsConfigDict(env_prefix="LOGIN_", frozen=True, extra="ignore")

    failure_limit: int = Field(10, ge=1)
    cooloff_s: float = Field(900, gt=0)
    throttle_proxy_count: int = Field(0, ge=0)


def service_settings() -> tuple[ChatSettings, LoginSettings]:
    """Both, read from the environment; a bad value is an ImproperlyConfigured naming it."""
    try:
        return ChatSettings(), LoginSettings()
    except ValidationError as exc:
        raise ImproperlyConfigured(_described(exc)) from None


def _described(exc: ValidationError) -> str:
    prefix = "CHAT_" if exc.title == ChatSettings.__name__ else "LOGIN_"
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        name = f"{prefix}{where.upper()}" if where else prefix.rstrip("_") + " settings"
        problems.append(f"{name}: {error['msg']} (got {error.get('input')!r})")
    return "; ".join(problems)
