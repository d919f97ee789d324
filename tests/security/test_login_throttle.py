"""Failed logins are throttled per username and per client address (django-axes).

LOGIN_FAILURE_LIMIT failures (default 10) of one username, or from one client address, within
LOGIN_COOLOFF_S (default 900 s) lock that username or address until the cool-off passes: the
login page comes back with HTTP 429, a clear message and Retry-After, and even the right
password does not log in. Other users on other addresses are not held up. The admin's login
page goes through the same check (it calls `authenticate` like ours).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import cast

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import caches
from django.http import HttpResponse
from django.test import Client, override_settings
from django.urls import reverse

pytestmark = pytest.mark.django_db

RIGHT = "pw-right-123"
WRONG = "pw-wrong-456"
LIMIT = 10


@pytest.fixture(autouse=True)
def fresh_counts() -> Iterator[None]:
    # The in-process counts outlive a test; each test starts from none.
    caches[settings.AXES_CACHE].clear()
    yield
    caches[settings.AXES_CACHE].clear()


@pytest.fixture
def victim(db: None) -> User:
    return User.objects.create_user("victim", password=RIGHT)


@pytest.fixture
def other(db: None) -> User:
    return User.objects.create_user("other", password=RIGHT)


def login(
    username: str, password: str, *, ip: str = "127.0.0.1", path: str = "", **headers: str
) -> HttpResponse:
    client = Client(REMOTE_ADDR=ip)
    response = client.post(
        path or reverse("login"), {"username": username, "password": password}, headers=headers
    )
    return cast(HttpResponse, response)


def logged_in(response: HttpResponse) -> bool:
    return response.status_code == 302 and "sessionid" in response.cookies


def assert_throttled(response: HttpResponse) -> None:
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    assert 'name="username"' in response.content.decode()  # the login page, not a bare error
    assert int(response["Retry-After"]) > 0
    assert "sessionid" not in response.cookies


def test_the_defaults_are_ten_failures_per_fifteen_minutes() -> None:
    assert settings.LOGIN_FAILURE_LIMIT == LIMIT
    assert settings.LOGIN_COOLOFF_S == 900
    assert settings.AXES_FAILURE_LIMIT == LIMIT
    assert timedelta(seconds=900) == settings.AXES_COOLOFF_TIME


def test_below_the_limit_a_wrong_password_is_an_ordinary_error_and_the_right_one_works(
    victim: User,
) -> None:
    for _ in range(LIMIT - 1):
        response = login("victim", WRONG)
        assert response.status_code == 200
        assert "Too many failed logins" not in response.content.decode()
    assert logged_in(login("victim", RIGHT))


def test_failures_of_one_username_lock_it_from_any_address_even_with_the_right_password(
    victim: User,
) -> None:
    responses = [login("victim", WRONG, ip=f"10.0.0.{i}") for i in range(LIMIT)]
    assert all(r.status_code == 200 for r in responses[:-1])
    assert_throttled(responses[-1])  # the failure that reaches the limit says so
    assert_throttled(login("victim", RIGHT, ip="10.9.9.9"))


def test_failures_from_one_address_lock_that_address_across_usernames(other: User) -> None:
    for i in range(LIMIT):
        login(f"guess-{i}", WRONG, ip="203.0.113.5")
    assert_throttled(login("other", RIGHT, ip="203.0.113.5"))
    assert logged_in(login("other", RIGHT, ip="198.51.100.7"))


def test_a_successful_login_is_not_blocked_by_other_users_failures(
    victim: User, other: User
) -> None:
    for _ in range(LIMIT):
        login("victim", WRONG, ip="203.0.113.5")
    assert_throttled(login("victim", RIGHT, ip="203.0.113.5"))
    assert logged_in(login("other", RIGHT, ip="198.51.100.7"))


def test_the_admin_login_is_throttled_by_the_same_counts(victim: User) -> None:
    victim.is_staff = True
    victim.save()
    admin_login = reverse("admin:login")
    for i in range(LIMIT):
        login("victim", WRONG, ip=f"10.0.1.{i}", path=admin_login)
    response = login("victim", RIGHT, ip="10.9.9.9", path=admin_login)
    assert_throttled(response)
    assert 'id="login-form"' in response.content.decode()  # the admin's own login page
    # and the failures counted on the admin page hold on the user login page too
    assert_throttled(login("victim", RIGHT, ip="10.9.9.8"))


@override_settings(AXES_COOLOFF_TIME=timedelta(seconds=1))
def test_the_lock_lifts_after_the_cool_off(victim: User) -> None:
    for _ in range(LIMIT):
        login("victim", WRONG)
    assert_throttled(login("victim", RIGHT))
    time.sleep(1.2)
    assert logged_in(login("victim", RIGHT))


def test_a_forged_forwarded_for_does_not_dodge_the_address_limit_without_a_proxy(
    other: User,
) -> None:
    # LOGIN_THROTTLE_PROXY_COUNT is 0 by default: X-Forwarded-For is the client's own word
    for i in range(LIMIT):
        login(f"guess-{i}", WRONG, ip="203.0.113.5", X_Forwarded_For=f"192.0.2.{i}")
    assert_throttled(login("other", RIGHT, ip="203.0.113.5", X_Forwarded_For="192.0.2.200"))


@override_settings(LOGIN_THROTTLE_PROXY_COUNT=1)
def test_behind_one_proxy_the_address_the_proxy_saw_is_counted(other: User) -> None:
    proxy = "10.1.1.1"  # every request comes from the proxy's address
    for i in range(LIMIT):
        # the client may send its own X-Forwarded-For; the proxy appends what it saw
        login(f"guess-{i}", WRONG, ip=proxy, X_Forwarded_For=f"192.0.2.{i}, 203.0.113.5")
    assert_throttled(login("other", RIGHT, ip=proxy, X_Forwarded_For="203.0.113.5"))
    assert logged_in(login("other", RIGHT, ip=proxy, X_Forwarded_For="198.51.100.7"))


@pytest.mark.redis
def test_with_redis_the_counts_are_shared_by_every_web_process(victim: User) -> None:
    from axes.handlers.proxy import AxesProxyHandler

    prefix = f"test-throttle-{uuid.uuid4().hex[:8]}"
    redis_cache = {
        **settings.CACHES,
        settings.AXES_CACHE: {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:6379/0",
            "KEY_PREFIX": prefix,
        },
    }
    # CACHES first, then AXES_HANDLER: changing the latter rebuilds axes' handler on that cache
    with override_settings(CACHES=redis_cache, AXES_HANDLER=settings.AXES_HANDLER):
        try:
            for _ in range(LIMIT):
                login("victim", WRONG)
            AxesProxyHandler.get_implementation(force=True)  # as a second process would start
            assert_throttled(login("victim", RIGHT, ip="10.9.9.9"))
        finally:
            caches[settings.AXES_CACHE].clear()
    AxesProxyHandler.get_implementation(force=True)


@pytest.mark.parametrize(
    ("redis_url", "backend"),
    [
        ("redis://127.0.0.1:6379/0", "django.core.cache.backends.redis.RedisCache"),
        ("", "django.core.cache.backends.locmem.LocMemCache"),
    ],
)
def test_the_counts_live_in_redis_when_redis_url_is_set(redis_url: str, backend: str) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "chatapp.settings.test", "REDIS_URL": redis_url}
    script = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.CACHES[s.AXES_CACHE]['BACKEND'], s.CACHES['default']['BACKEND']]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    throttle, default = json.loads(out.stdout.strip().splitlines()[-1])
    assert throttle == backend
    assert default == "django.core.cache.backends.locmem.LocMemCache"  # nothing else moves
