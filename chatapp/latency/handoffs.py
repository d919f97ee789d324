"""The handoff part of the latency report: how often customers ask for a person, how long
they wait for the first human reply, and how the asks end.

Read from stored rows (`Handoff`, its events, the people's messages), so the numbers hold for
any number of web processes and survive restarts, like the rest of the report; `/metrics` has
the live counters (`chat:handoffs_total`, `chat:handoff_first_response_seconds`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.db.models import QuerySet

from chatapp.conversations.models import Message
from chatapp.handoff.models import Handoff, HandoffEvent
from chatapp.latency.percentiles import percentiles

_Query = TypeVar("_Query", bound=QuerySet[Any])
# Asks read for one report (each is a few values); past it the newest are counted.
ASK_CAP = 20_000
# How asks end, as the dashboard names them (HandoffEvent actions).
OUTCOMES = ("close", "release", "cancel")


@dataclass(frozen=True, slots=True)
class HandoffSummary:
    asks: int  # customers who asked for a person in the window
    conversations: int  # conversations the assistant answered in the window
    waiting_now: int
    # seconds from an ask to the first reply of a person, for the asks that got one
    first_response_p50_s: float | None
    first_response_p95_s: float | None
    first_responses: int
    outcomes: dict[str, int]  # close / release / cancel -> asks that ended so
    resolutions: list[tuple[str, int]]  # the most frequent close resolutions

    @property
    def rate(self) -> float | None:
        """Asks per conversation answered in the window (a conversation may ask twice)."""
        return None if not self.conversations else self.asks / self.conversations

    def as_json(self) -> dict[str, Any]:
        return {
            "asks": self.asks,
            "conversations": self.conversations,
            "rate": self.rate,
            "waiting_now": self.waiting_now,
            "first_response_s": {
                "p50": self.first_response_p50_s,
                "p95": self.first_response_p95_s,
                "count": self.first_responses,
            },
            "outcomes": self.outcomes,
            "resolutions": [{"resolution": r, "count": n} for r, n in self.resolutions],
        }


def handoff_summary(*, start: datetime, now: datetime, site_id: int | None) -> HandoffSummary:
    asks = Handoff.objects.filter(requested_at__gte=start, requested_at__lte=now)
    answered = Message.objects.filter(
        role=Message.Role.ASSISTANT, finished_at__gte=start, finished_at__lte=now
    )
    waiting = Handoff.objects.filter(state=Handoff.State.WAITING)
    if site_id is not None:
        asks, waiting = (_of_site(q, "conversation__owner", site_id) for q in (asks, waiting))
        answered = _of_site(answered, "conversation__owner", site_id)
    rows = list(
        asks.order_by("-requested_at").values_list(
            "id", "conversation_id", "requested_at", "ended_at", "resolution"
        )[:ASK_CAP]
    )
    waits = first_response_waits(rows, _agent_messages({r[1] for r in rows}, start))
    p50, p95 = percentiles(waits, (50, 95))
    ids = [r[0] for r in rows]
    ended = Counter(
        HandoffEvent.objects.filter(handoff_id__in=ids, action__in=OUTCOMES).values_list(
            "action", flat=True
        )
    )
    resolutions = Counter(r[4].strip() for r in rows if r[4].strip())
    return HandoffSummary(
        asks=len(rows),
        conversations=answered.values("conversation_id").distinct().count(),
        waiting_now=waiting.count(),
        first_response_p50_s=None if p50 is None else round(p50, 1),
        first_response_p95_s=None if p95 is None else round(p95, 1),
        first_responses=len(waits),
        outcomes={outcome: ended[outcome] for outcome in OUTCOMES},
        resolutions=resolutions.most_common(5),
    )


def first_response_waits(
    asks: Iterable[tuple[Any, Any, datetime, datetime | None, str]],
    replies: dict[Any, list[datetime]],
) -> list[float]:
    """For each ask (id, conversation, asked, ended, resolution), the seconds to the first
    reply of a person in its conversation after it was asked and before it ended; asks
    nobody answered are left out. Pure: `replies` is each conversation's agent messages,
    oldest first."""
    waits = []
    for _, conversation, asked, ended, _ in asks:
        first = next(
            (
                at
                for at in replies.get(conversation, [])
                if at >= asked and (ended is None or at <= ended)
            ),
            None,
        )
        if first is not None:
            waits.append((first - asked).total_seconds())
    return waits


def _agent_messages(conversations: set[Any], since: datetime) -> dict[Any, list[datetime]]:
    replies: dict[Any, list[datetime]] = {}
    rows = (
        Message.objects.filter(
            conversation_id__in=conversations, role=Message.Role.AGENT, created_at__gte=since
        )
        .order_by("created_at")
        .values_list("conversation_id", "created_at")
    )
    for conversation, at in rows:
        replies.setdefault(conversation, []).append(at)
    return replies


def _of_site(query: _Query, owner: str, site_id: int) -> _Query:
    """Only that website's guests' rows (its widget)."""
    return query.filter(**{f"{owner}__guest__site_id": site_id})
