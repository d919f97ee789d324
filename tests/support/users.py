"""Users for the socket tests: two, so every test can check one cannot reach the other's."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import Client


@pytest.fixture
async def alice() -> User:
    return await sync_to_async(User.objects.create_user)("alice", password="pw-alice-123")


@pytest.fixture
async def bob() -> User:
    return await sync_to_async(User.objects.create_user)("bob", password="pw-bob-123")


def client_for(user: User | None, *, enforce_csrf_checks: bool = False) -> Client:
    """A test client logged in as `user` (anonymous for None)."""
    client = Client(enforce_csrf_checks=enforce_csrf_checks)
    if user is not None:
        client.force_login(user)
    return client
