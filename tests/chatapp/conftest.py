"""Fixtures of the web side's tests (defined in tests/support): two users, so every test can
check one cannot reach the other's, a published template, a worker with the real FAQ embedding
model, handoff's word questions loaded."""

from tests.support.faq import embedder, faq_decider, faq_worker, prepared_verifier
from tests.support.intents import intents_loaded
from tests.support.templates import published
from tests.support.users import alice, bob

__all__ = [
    "alice",
    "bob",
    "embedder",
    "faq_decider",
    "faq_worker",
    "intents_loaded",
    "prepared_verifier",
    "published",
]
