"""A website that embeds the widget (`Site`), and a visitor of it chatting as a guest (`Guest`).

A guest is backed by a Django user of its own with no usable password: conversations,
admission and every selector already key on a user, so a guest's conversations are as private
as a staff member's, and nothing on the answer path knows guests apart. The user never gets a
session; only the guest token (chatapp/websites/tokens.py) speaks for it.
"""

from __future__ import annotations

import logging
import secrets
import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from chatapp.conversations.models import Conversation
from chatapp.websites.hours import HoursError, TeamHours, spans_parsed, time_zone
from chatapp.websites.origins import OriginError, origins_parsed

SITE_KEY_PREFIX = "site_"
_log = logging.getLogger(__name__)


def new_site_key() -> str:
    # Public (it is in the host page's HTML): it names the site, it proves nothing.
    return SITE_KEY_PREFIX + secrets.token_urlsafe(12)


class Site(models.Model):
    name = models.CharField(max_length=100, help_text="For you, e.g. 'Shop, main website'.")
    key = models.CharField(max_length=40, unique=True, editable=False, default=new_site_key)
    allowed_origins = models.TextField(
        help_text=(
            "The pages that may show the widget: one origin a line, scheme://host[:port], "
            "e.g. https://shop.example. Any other page gets no widget."
        )
    )
    enabled = models.BooleanField(default=True, help_text="Off: the widget shows nothing.")
    title = models.CharField(max_length=80, default="Chat with us")
    greeting = models.TextField(blank=True, default="Hi! How can we help?")
    accent_colour = models.CharField(
        max_length=7,
        default="#2563eb",
        validators=[RegexValidator(r"^#[0-9a-fA-F]{6}$", "A colour is # and six hex digits.")],
    )
    default_template = models.ForeignKey(
        "prompts.PromptTemplate",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        help_text="The template the widget's questions are asked with (and its FAQ entries).",
    )
    offered_templates = models.ManyToManyField(
        "prompts.PromptTemplate",
        blank=True,
        related_name="+",
        help_text="Templates the panel offers to start a conversation with (published ones).",
    )
    visitor_rate = models.PositiveIntegerField(
        default=10,
        validators=[MinValueValidator(1)],
        help_text="Questions one visitor may ask per window.",
    )
    visitor_rate_window_s = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(1), MaxValueValidator(86_400)],
        help_text="The rate window, in seconds.",
    )
    visitor_max_concurrent = models.PositiveIntegerField(
        default=1,
        validators=[MinValueValidator(1)],
        help_text="Answers one visitor may have generating at once.",
    )
    address_rate = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1)],
        help_text=(
            "Questions all visitors from one network address may ask per window, together "
            "(an office behind one address counts once)."
        ),
    )
    address_max_concurrent = models.PositiveIntegerField(
        default=4,
        validators=[MinValueValidator(1)],
        help_text="Answers all visitors from one network address may have generating at once.",
    )
    new_visitors_per_address = models.PositiveIntegerField(
        default=20,
        validators=[MinValueValidator(1)],
        help_text=(
            "New visitors one network address may start per hour (a visitor coming back is "
            "not counted): bounds how many per-visitor limits one machine can collect."
        ),
    )
    retention_days = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(3650)],
        help_text=(
            "A visitor's conversations are deleted this many days after their last visit; "
            "their widget link expires with them."
        ),
    )
    opening_hours = models.TextField(
        blank=True,
        help_text=(
            "When the team answers, one span a line: days, then times, e.g. "
            "'Mon-Fri 09:00-17:30', 'Sat 10:00-14:00', 'Fri 22:00-02:00' (past midnight). "
            "Outside them a visitor asking for a person is told when the team is back and may "
            "leave an email address. Blank: always open."
        ),
    )
    time_zone = models.CharField(
        max_length=64,
        blank=True,
        help_text="The team hours' clock (needed with hours): an IANA name, e.g. Europe/Berlin.",
    )
    is_example = models.BooleanField(
        default=False, help_text="Seeded by `make run` for a first try; delete it when done."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        try:
            origins = origins_parsed(self.allowed_origins)
        except OriginError as exc:
            errors["allowed_origins"] = str(exc)
        else:
            if origins:
                self.allowed_origins = "\n".join(origins)  # stored as browsers send them
            else:
                errors["allowed_origins"] = "List at least one origin."
        try:
            spans = spans_parsed(self.opening_hours)
        except HoursError as exc:
            errors["opening_hours"] = str(exc)
            spans = ()
        if self.time_zone.strip():
            try:
                self.time_zone = time_zone(self.time_zone).key
            except HoursError as exc:
                errors["time_zone"] = str(exc)
        elif spans:  # no guessing: 09:00 means something else in every zone
            errors["time_zone"] = "Say which time zone the team hours are in, e.g. Europe/Berlin."
        if errors:
            raise ValidationError(errors)

    @property
    def origins(self) -> tuple[str, ...]:
        return origins_parsed(self.allowed_origins)

    @property
    def team_hours(self) -> TeamHours:
        """When the team answers. Hours saved past validation (not through the form) that no
        longer read count as always open, as before sites had hours."""
        try:
            return TeamHours(spans_parsed(self.opening_hours), time_zone(self.time_zone or "UTC"))
        except HoursError as exc:
            _log.warning("site %s: team hours ignored: %s", self.pk, exc)
            return TeamHours((), time_zone("UTC"))

    def template_ids(self) -> frozenset[int]:
        """The templates a guest may start with: the offered ones and the default."""
        offered = set(self.offered_templates.values_list("id", flat=True))
        if self.default_template_id is not None:
            offered.add(self.default_template_id)
        return frozenset(offered)


class Guest(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="guests")
    # Deleting the user deletes the guest and its conversations (the retention sweep does).
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="guest"
    )
    origin = models.CharField(max_length=200, help_text="The page's origin on the first visit.")
    # A keyed hash of the network address it first came from (the address itself is not kept):
    # counts new visitors per address.
    address_hash = models.CharField(max_length=64, blank=True, db_index=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ("-last_seen_at",)

    def __str__(self) -> str:
        return f"guest {str(self.id)[:8]} of {self.site}"


class GuestConversation(Conversation):
    """Guests' conversations, for staff in admin (the rows are conversations')."""

    class Meta:
        proxy = True
        verbose_name = "guest conversation"
