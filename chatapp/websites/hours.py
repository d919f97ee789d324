"""A website team's hours, read from what a support admin types, and what they mean at a moment.

One span a line: the days, then the times (several, comma-separated, for a break):

    Mon-Fri 09:00-17:30
    Sat 10:00-14:00
    Fri 22:00-02:00            # past midnight: open until Saturday 02:00
    Mon,Wed 08:00-12:00, 13:00-17:00

Times are the site's wall clock in its time zone (an IANA name such as Europe/Berlin), so
"09:00" stays 09:00 across a daylight-saving change. A span is open from its first minute and
closed from its last: `09:00-17:30` is open at 09:00 and closed at 17:30. No spans at all: the
team is always open (as before sites had hours).

Pure: the caller gives the moment (`now`, an aware datetime).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MINUTES_A_DAY = 24 * 60
_TIME = re.compile(r"^(\d{1,2})[:.](\d{2})$")
_DASHES = str.maketrans({"\u2013": "-", "\u2014": "-"})  # typed, or pasted from a web page
_EXAMPLE = "e.g. Mon-Fri 09:00-17:30"


class HoursError(ValueError):
    """The text is not team hours; the message says why, in words for the admin form."""


@dataclass(frozen=True, slots=True)
class Span:
    day: int  # the weekday it opens on, 0 = Monday
    opens: int  # minutes after that day's midnight
    closes: int  # minutes after that day's midnight: over 1440 when it closes the next day

    def covers(self, day: int, minute: int) -> bool:
        """Whether minute `minute` (after midnight, wall clock) of weekday `day` is inside."""
        if day == self.day:
            return self.opens <= minute < self.closes
        if day == (self.day + 1) % 7:  # the part past midnight
            return minute + _MINUTES_A_DAY < self.closes
        return False


@dataclass(frozen=True, slots=True)
class TeamHours:
    spans: tuple[Span, ...]  # none: always open
    zone: ZoneInfo


def time_zone(name: str) -> ZoneInfo:
    """The time zone named `name` (IANA), or HoursError in words."""
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise HoursError(
            f"{name!r} is not a time zone: write its IANA name, e.g. Europe/Berlin, "
            "America/New_York or UTC"
        ) from None


def spans_parsed(text: str) -> tuple[Span, ...]:
    """One span a line (blank lines and `#` comments skipped); HoursError names the first bad
    line."""
    spans: list[Span] = []
    for number, line in enumerate(text.splitlines(), start=1):
        content = line.split("#", 1)[0].strip()
        if not content:
            continue
        try:
            spans.extend(_line_spans(content))
        except HoursError as exc:
            raise HoursError(f"line {number} ({content!r}): {exc}") from None
    return tuple(spans)


def is_open(hours: TeamHours, now: datetime) -> bool:
    """Whether the team is in its hours at `now` (aware)."""
    if not hours.spans:
        return True
    local = now.astimezone(hours.zone)
    minute = local.hour * 60 + local.minute
    return any(span.covers(local.weekday(), minute) for span in hours.spans)


def next_opening(hours: TeamHours, now: datetime) -> datetime | None:
    """When the team opens next after `now` (aware), in the site's zone; None while it is
    open (or always)."""
    if is_open(hours, now):
        return None
    today = now.astimezone(hours.zone).date()
    after = now.astimezone(UTC)
    starts: list[datetime] = []
    for ahead in range(8):  # every span's weekday comes round within a week
        day = today + timedelta(days=ahead)
        for span in hours.spans:
            if span.day == day.weekday():
                start = _wall_clock(day, span.opens, hours.zone)
                if start > after:
                    starts.append(start)
    opening = min(starts)
    return opening.astimezone(hours.zone)


def away_until(hours: TeamHours, now: datetime) -> str | None:
    """When the team is back, in words ("Monday 09:00 (Europe/Berlin)"); None while it is
    open."""
    opening = next_opening(hours, now)
    if opening is None:
        return None
    ahead = (opening.date() - now.astimezone(hours.zone).date()).days
    at = f"{opening:%H:%M}"
    if ahead == 0:
        when = f"{at} today"
    elif ahead == 1:
        when = f"{at} tomorrow"
    else:  # within a week: the weekday says which day ("next" when it is today's weekday)
        day = DAY_NAMES[opening.weekday()]
        when = f"next {day} {at}" if ahead == 7 else f"{day} {at}"
    return f"{when} ({hours.zone.key})"


def _wall_clock(day: date, minute: int, zone: ZoneInfo) -> datetime:
    """`minute` after midnight of `day` on the zone's clock, as a UTC moment (a time skipped
    by a daylight-saving change is read with the offset before it)."""
    local = datetime(day.year, day.month, day.day, minute // 60, minute % 60, tzinfo=zone)
    return local.astimezone(UTC)


def _line_spans(line: str) -> list[Span]:
    # the days are all before the first digit ("Mon, Wed 09:00-12:00" has a space in them)
    match = re.match(r"^(?P<days>\D+?)\s*(?P<times>\d.*)$", line.translate(_DASHES))
    if match is None:
        raise HoursError(f"write the days, then the times, {_EXAMPLE}")
    days = _days(match["days"])
    times = [_times(part) for part in match["times"].split(",")]
    return [Span(day, opens, closes) for day in days for opens, closes in times]


def _days(text: str) -> list[int]:
    days: dict[int, None] = {}
    for part in text.split(","):
        if "-" in part:
            first_text, _, last_text = part.partition("-")
            first, last = _day(first_text), _day(last_text)
            # a range may wrap round the week: Fri-Mon is Fri, Sat, Sun, Mon
            for offset in range((last - first) % 7 + 1):
                days[(first + offset) % 7] = None
        else:
            days[_day(part)] = None
    return list(days)


def _day(text: str) -> int:
    word = text.strip().lower()
    for number, name in enumerate(DAY_NAMES):
        if len(word) >= 3 and name.lower().startswith(word):
            return number
    raise HoursError(f"{text.strip()!r} is not a day: write Mon, Tue, Wed, Thu, Fri, Sat or Sun")


def _times(text: str) -> tuple[int, int]:
    opens_text, dash, closes_text = text.strip().partition("-")
    if not dash:
        raise HoursError(f"{text.strip()!r} is not a time span: write opening-closing, 09:00-17:30")
    opens, closes = _minute(opens_text), _minute(closes_text)
    if opens == _MINUTES_A_DAY:
        raise HoursError("24:00 can only close a span")
    if closes == opens:
        raise HoursError(f"{text.strip()!r} opens and closes at the same time")
    if closes < opens:  # past midnight: it closes the next day
        closes += _MINUTES_A_DAY
    return opens, closes


def _minute(text: str) -> int:
    match = _TIME.match(text.strip())
    if match is not None:
        hour, minute = int(match[1]), int(match[2])
        if (hour < 24 and minute < 60) or (hour, minute) == (24, 0):
            return hour * 60 + minute
    raise HoursError(f"{text.strip()!r} is not a time: write hours and minutes, e.g. 09:00")
