"""The socket tests' users (alice and bob) for the metrics tests too."""

from tests.chatapp.realtime.conftest import alice, bob

__all__ = ["alice", "bob"]
