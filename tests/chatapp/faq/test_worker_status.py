"""The admin's FAQ list says what decides the workers' FAQ answers, as their syncs report it:
e.g. exact repeats only while the verifier is still training."""

from __future__ import annotations

import json
import time
import uuid

import pytest
import redis
from django.test import Client

from chatapp.faq import worker_status
from inference.wire.embedded_redis import embedded_redis_url
from tests.support.admin import superuser_client

pytestmark = pytest.mark.django_db

TRAINING = "exact repeats of an entry's phrasings only: training: epoch 2/4: 40% (310 s)"


@pytest.fixture
def admin_client() -> Client:
    return superuser_client()


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.redis)])
def store(request: pytest.FixtureRequest, settings: object) -> str:
    if request.param == "server":
        settings.REDIS_URL = "redis://127.0.0.1:6379/0"  # type: ignore[attr-defined]
    else:
        settings.REDIS_URL = ""  # type: ignore[attr-defined]
    return str(request.param)


def test_the_faq_list_shows_each_workers_decision(admin_client: Client, store: str) -> None:
    worker = f"inference.worker!{uuid.uuid4().hex}"
    worker_status.record(worker=worker, decision=TRAINING)
    page = admin_client.get("/admin/faq/faqentry/").content.decode()
    assert "FAQ answers are decided by" in page
    assert "epoch 2/4: 40%" in page
    mine = [s for s in worker_status.current() if s.worker == worker]
    assert [s.decision for s in mine] == [TRAINING]


def test_a_worker_not_heard_from_drops_out(admin_client: Client, settings: object) -> None:
    settings.REDIS_URL = ""  # type: ignore[attr-defined]
    gone = {"decision": "the learned verifier", "at": time.time() - worker_status.TTL_S - 1}
    with redis.Redis.from_url(embedded_redis_url()) as client:  # its key not yet expired
        client.set(worker_status.KEY_PREFIX + "gone", json.dumps(gone), ex=60)
    assert worker_status.current() == []
    page = admin_client.get("/admin/faq/faqentry/").content.decode()
    assert "No inference worker has reported its FAQ cache yet" in page
