"""Fixtures of the socket tests, shared with the metrics tests: users, a published template,
a worker with the real FAQ embedding model."""

from tests.chatapp.realtime.conftest import alice, bob
from tests.chatapp.realtime.test_faq_answers import embedder, faq_worker
from tests.chatapp.realtime.test_templated_messages import published

__all__ = ["alice", "bob", "embedder", "faq_worker", "published"]
