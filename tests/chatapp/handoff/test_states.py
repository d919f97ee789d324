"""Who answers a conversation: every action from every state, and what the customer reads."""

from __future__ import annotations

from typing import get_args

import pytest

from chatapp.handoff import states

ALLOWED = {
    ("bot", "request"): "waiting",
    ("closed", "request"): "waiting",
    ("waiting", "cancel"): "bot",
    ("waiting", "claim"): "with_agent",
    ("waiting", "close"): "closed",
    ("with_agent", "transfer"): "with_agent",
    ("with_agent", "release"): "bot",
    ("with_agent", "close"): "closed",
}


@pytest.mark.parametrize("state", get_args(states.State))
@pytest.mark.parametrize("action", get_args(states.Action))
def test_each_action_leads_where_it_should_or_is_refused_in_words(
    state: states.State, action: states.Action
) -> None:
    result = states.after(state, action)
    if (state, action) in ALLOWED:
        assert result == ALLOWED[(state, action)]
    else:
        assert isinstance(result, states.NotAllowed)
        assert result.message.endswith(".")


def test_the_assistant_is_silent_while_a_person_is_asked_for_or_holds_it() -> None:
    assert [s for s in get_args(states.State) if states.bot_answers(s)] == ["bot", "closed"]


def test_the_customer_is_told_where_they_stand() -> None:
    assert (
        states.notice("waiting", position=1) == "A person will join shortly. You are next in line."
    )
    assert states.notice("waiting", position=2).endswith("You are number 2 in line.")
    assert states.notice("with_agent", agent="Dana") == "Dana joined the conversation."
    assert states.notice("bot") == "Back with the assistant."
    assert states.notice("closed").startswith("The conversation was closed.")
