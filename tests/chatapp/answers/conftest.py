"""Fixtures of the answer-lifecycle tests."""

from tests.support.users import alice

__all__ = ["alice"]
