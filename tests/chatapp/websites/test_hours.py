"""Team hours as a support admin types them: what they mean on weekdays, at weekends, on their
boundaries, past midnight and across a daylight-saving change; blank is always open; bad lines
are named."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chatapp.websites.hours import (
    HoursError,
    Span,
    TeamHours,
    away_until,
    is_open,
    next_opening,
    spans_parsed,
    time_zone,
)

BERLIN = time_zone("Europe/Berlin")
OFFICE = "Mon-Fri 09:00-17:30\nSat 10:00-14:00"


def hours(text: str) -> TeamHours:
    return TeamHours(spans_parsed(text), BERLIN)


def berlin(day: int, hour: int, minute: int = 0, second: int = 0) -> datetime:
    """June 2025, on Berlin's clock: day 2 is a Monday, 7 a Saturday, 8 a Sunday."""
    return datetime(2025, 6, day, hour, minute, second, tzinfo=BERLIN)


def test_a_line_is_days_then_times() -> None:
    assert spans_parsed(OFFICE) == (
        *(Span(day, 9 * 60, 17 * 60 + 30) for day in range(5)),
        Span(5, 10 * 60, 14 * 60),
    )


@pytest.mark.parametrize(
    ("moment", "open_"),
    [
        (berlin(4, 12), True),  # Wednesday noon
        (berlin(4, 8, 59, 59), False),
        (berlin(4, 9), True),  # opens at 09:00 exactly
        (berlin(4, 17, 29, 59), True),
        (berlin(4, 17, 30), False),  # closed at 17:30 exactly
        (berlin(6, 16), True),  # Friday
        (berlin(7, 9, 59), False),  # Saturday, before it opens
        (berlin(7, 12), True),
        (berlin(7, 14), False),
        (berlin(8, 12), False),  # Sunday: no span
        (datetime(2025, 6, 4, 7, 0, tzinfo=UTC), True),  # 09:00 in Berlin (summer time)
        (datetime(2025, 6, 4, 6, 59, tzinfo=UTC), False),
    ],
)
def test_open_on_weekdays_and_saturday_mornings(moment: datetime, open_: bool) -> None:
    assert is_open(hours(OFFICE), moment) is open_


@pytest.mark.parametrize("text", ["", "\n  \n", "# nobody has set hours yet"])
def test_blank_hours_are_always_open(text: str) -> None:
    always = hours(text)
    assert always.spans == ()
    for moment in (berlin(8, 3), berlin(4, 12)):
        assert is_open(always, moment)
        assert next_opening(always, moment) is None
        assert away_until(always, moment) is None


@pytest.mark.parametrize(
    ("moment", "words"),
    [
        (berlin(7, 15), "Monday 09:00 (Europe/Berlin)"),  # Saturday after closing
        (berlin(8, 12), "09:00 tomorrow (Europe/Berlin)"),  # Sunday
        (berlin(2, 7), "09:00 today (Europe/Berlin)"),
        (berlin(6, 17, 30), "10:00 tomorrow (Europe/Berlin)"),  # Friday at closing time
        (berlin(4, 12), None),  # open
    ],
)
def test_when_it_opens_next_in_words(moment: datetime, words: str | None) -> None:
    assert away_until(hours(OFFICE), moment) == words


def test_the_same_weekday_a_week_on_is_next() -> None:
    mondays = hours("Mon 09:00-12:00")
    assert next_opening(mondays, berlin(2, 13)) == berlin(9, 9)
    assert away_until(mondays, berlin(2, 13)) == "next Monday 09:00 (Europe/Berlin)"


def test_a_span_past_midnight_ends_the_next_day() -> None:
    late = hours("Fri 22:00-02:00\nSun 23:00-01:00")
    assert spans_parsed("Fri 22:00-02:00") == (Span(4, 22 * 60, 26 * 60),)
    assert not is_open(late, berlin(6, 21, 59))
    assert is_open(late, berlin(6, 22))
    assert is_open(late, berlin(7, 1, 59))  # Saturday
    assert not is_open(late, berlin(7, 2))
    assert not is_open(late, berlin(5, 1))  # not past Thursday's midnight
    assert is_open(late, berlin(9, 0, 30))  # Sunday's span into Monday: the week wraps
    assert away_until(late, berlin(7, 2)) == "23:00 tomorrow (Europe/Berlin)"


def test_whole_days_run_to_midnight() -> None:
    days = hours("Mon-Fri 00:00-24:00")
    assert is_open(days, berlin(6, 23, 59, 59))
    assert not is_open(days, berlin(7, 0))
    assert away_until(days, berlin(7, 0)) == "Monday 00:00 (Europe/Berlin)"


def test_the_clock_moves_with_daylight_saving_time() -> None:
    # Berlin goes from UTC+1 to UTC+2 on Sunday 30 March 2025: 09:00 is 08:00 UTC on the
    # Friday before and 07:00 UTC on the Monday after
    office = hours(OFFICE)
    assert not is_open(office, datetime(2025, 3, 28, 7, 30, tzinfo=UTC))  # 08:30 CET
    assert is_open(office, datetime(2025, 3, 28, 8, 0, tzinfo=UTC))
    opening = next_opening(office, datetime(2025, 3, 29, 14, 0, tzinfo=UTC))
    assert opening == datetime(2025, 3, 31, 7, 0, tzinfo=UTC)
    assert opening is not None
    assert f"{opening:%A %H:%M}" == "Monday 09:00"
    assert is_open(office, datetime(2025, 3, 31, 7, 30, tzinfo=UTC))  # 09:30 CEST
    # and back on 26 October: a night span keeps its wall-clock end through the longer night
    night = hours("Sat 22:00-06:00")
    assert is_open(night, datetime(2025, 10, 26, 4, 59, tzinfo=UTC))  # 05:59 CET
    assert not is_open(night, datetime(2025, 10, 26, 5, 0, tzinfo=UTC))  # 06:00 CET


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("monday-friday 09:00-17:00", [0, 1, 2, 3, 4]),
        ("Tues 09:00-17:00", [1]),
        ("Mon, Wed,Fri 09:00-17:00", [0, 2, 4]),
        ("Fri-Mon 09:00-17:00", [4, 5, 6, 0]),  # round the weekend
        ("Sat\u2013Sun 10:00\u201314:00", [5, 6]),  # dashes pasted from a web page
    ],
)
def test_days_are_written_as_people_write_them(text: str, days: list[int]) -> None:
    assert [span.day for span in spans_parsed(text)] == days


def test_a_day_may_have_a_break() -> None:
    split = hours("Mon-Fri 08:00-12:00, 13:00-17:00")
    assert is_open(split, berlin(2, 11, 59))
    assert not is_open(split, berlin(2, 12, 30))
    assert away_until(split, berlin(2, 12, 30)) == "13:00 today (Europe/Berlin)"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Mon-Fir 09:00-17:00", "line 1 ('Mon-Fir 09:00-17:00'): 'Fir' is not a day"),
        ("Mo 09:00-17:00", "'Mo' is not a day"),
        ("09:00-17:00", "write the days, then the times, e.g. Mon-Fri 09:00-17:30"),
        ("Mon", "write the days, then the times"),
        ("Mon 09:00", "'09:00' is not a time span"),
        ("Mon 9am-5pm", "'9am' is not a time"),
        ("Mon 25:00-26:00", "'25:00' is not a time"),
        ("Mon 09:60-10:00", "'09:60' is not a time"),
        ("Mon 24:00-02:00", "24:00 can only close a span"),
        ("Mon 09:00-09:00", "'09:00-09:00' opens and closes at the same time"),
        ("Mon-Fri 09:00-17:00\n\nSat 10-14", "line 3 ('Sat 10-14'): '10' is not a time"),
    ],
)
def test_a_bad_line_is_named_with_what_is_wrong(text: str, error: str) -> None:
    with pytest.raises(HoursError) as raised:
        spans_parsed(text)
    assert error in str(raised.value)


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../../etc/passwd", "Europe/"])
def test_a_time_zone_is_an_iana_name(name: str) -> None:
    with pytest.raises(HoursError, match="is not a time zone"):
        time_zone(name)
    assert time_zone(" America/New_York ").key == "America/New_York"
