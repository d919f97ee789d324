"""Who answers a conversation, as a state machine: the assistant (`bot`), nobody yet while
the customer waits for a person (`waiting`), a person (`with_agent`), or nobody any more
(`closed`: a person closed it with a resolution; a new question starts over with the bot).

Pure: `after` says what an action leads to, or why it may not happen; services store it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

State = Literal["bot", "waiting", "with_agent", "closed"]
Action = Literal["request", "cancel", "claim", "transfer", "release", "close"]
# Who may take each action: the customer (the conversation's owner) or an agent.
CUSTOMER_ACTIONS: frozenset[Action] = frozenset({"request", "cancel"})

_AFTER: dict[tuple[State, Action], State] = {
    ("bot", "request"): "waiting",
    ("closed", "request"): "waiting",
    ("waiting", "cancel"): "bot",
    ("waiting", "claim"): "with_agent",
    ("waiting", "close"): "closed",  # e.g. answered by email, or spam
    ("with_agent", "transfer"): "with_agent",
    ("with_agent", "release"): "bot",
    ("with_agent", "close"): "closed",
}

_WHY_NOT: dict[Action, str] = {
    "request": "A person has already been asked for.",
    "cancel": "Nobody is being waited for.",
    "claim": "This conversation is not waiting for a person.",
    "transfer": "Only a conversation with a person can be transferred.",
    "release": "Only a conversation with a person can go back to the assistant.",
    "close": "This conversation is not with a person.",
}


@dataclass(frozen=True, slots=True)
class NotAllowed:
    message: str


def after(state: State, action: Action) -> State | NotAllowed:
    """The state `action` leads to from `state`, or why it is not allowed."""
    nxt = _AFTER.get((state, action))
    return NotAllowed(_WHY_NOT[action]) if nxt is None else nxt


def bot_answers(state: State) -> bool:
    """Whether a question is answered by the assistant (not while a person is asked for or
    holds the conversation)."""
    return state in ("bot", "closed")


def notice(
    state: State,
    *,
    position: int | None = None,
    agent: str | None = None,
    nobody_online: bool = False,
    contact_email: str = "",
    away_until: str = "",
) -> str:
    """What the customer is told, in words. `away_until`: outside its website's team hours,
    when the team is back ("Monday 09:00 (Europe/Berlin)")."""
    if state == "waiting" and contact_email:
        return f"Thank you! The team will write to you at {contact_email}."
    if state == "waiting" and away_until:
        return (
            f"The team is away until {away_until}. Leave your email address and we will "
            "write back, or keep waiting here."
        )
    if state == "waiting" and nobody_online:
        return (
            "Nobody from the team is online right now. Leave your email address and we will "
            "write back, or keep waiting here."
        )
    if state == "waiting":
        if position is None or position < 1:
            return "Waiting for a person to join."
        ahead = "You are next in line." if position == 1 else f"You are number {position} in line."
        return f"A person will join shortly. {ahead}"
    if state == "with_agent":
        return f"{agent or 'A person'} joined the conversation."
    if state == "closed":
        return "The conversation was closed. Ask again any time."
    return "Back with the assistant."
