"""Whether a waiting customer can expect a person soon, and so what they are told.

Outside the team hours of the website the conversation came from, the team is away until it
opens; inside them (or for a conversation not from a website, which has no hours) nobody is
online when no agent console is open. Either way the customer may leave an email address
(`nobody_online` on the state frame offers it). Pure: the edges read presence and the clock.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from chatapp.handoff.selectors import HandoffView
from chatapp.websites.hours import away_until


def as_told(view: HandoffView, *, consoles_open: bool, now: datetime) -> HandoffView:
    """`view` with whether a person can be expected: only a waiting customer is told."""
    if view.state != "waiting":
        return replace(view, nobody_online=False, away_until="")
    away = None if view.team_hours is None else away_until(view.team_hours, now)
    return replace(view, nobody_online=away is not None or not consoles_open, away_until=away or "")
