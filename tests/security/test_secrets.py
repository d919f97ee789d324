"""Point 5: secrets never reach the logs or the console; production settings fail closed.
Point 6: API keys are stored as hashes only.

The log capture takes every record of every logger at DEBUG: each logger is set to DEBUG and
enabled for the test, and `Logger.handle` is wrapped, so records of loggers that do not
propagate to the root are seen too. The formatted text of each record (message, arguments,
traceback, extra fields) is searched, as well as everything the process wrote to its stdout
and stderr file descriptors (`capfd`).

The production settings are imported in a subprocess with a clean environment (only PATH,
HOME and a data dir), as a container starts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.urls import reverse
from websockets.sync.client import connect as ws_connect

from chatapp.answers.runtime import answer_runtime_close
from chatapp.apikeys.models import ApiKey
from chatapp.asgi import application
from tests.conftest import RunningWorker
from tests.integration.processes import (
    app_served,
)
from tests.security.support import raw_socket
from tests.support.sockets import ask, send_frame
from tests.support.users import client_for

REPO_ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "pw-erin-Tr0ub4dor&3-secret"
API_KEY = re.compile(r"ick_[0-9a-f]{8}_[A-Za-z0-9_-]{20,}")
# The attributes every LogRecord has; anything else came in through `extra=` and would be
# written by a structured (JSON) formatter, so it is searched too.
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message"}


class EveryRecord:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self._formatter = logging.Formatter("%(levelname)s %(name)s: %(message)s")

    def add(self, record: logging.LogRecord) -> None:
        extra = {k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS}
        self.lines.append(f"{self._formatter.format(record)} {extra!r}")

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def every_log_record(monkeypatch: pytest.MonkeyPatch) -> Iterator[EveryRecord]:
    recorder = EveryRecord()
    manager = logging.Logger.manager
    loggers = [logging.getLogger()] + [
        lg for lg in manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    saved = [(lg, lg.level, lg.disabled) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
        lg.disabled = False
    logging.disable(logging.NOTSET)
    handle = logging.Logger.handle

    def recording_handle(self: logging.Logger, record: logging.LogRecord) -> None:
        recorder.add(record)
        handle(self, record)

    monkeypatch.setattr(logging.Logger, "handle", recording_handle)
    yield recorder
    for lg, level, disabled in saved:
        lg.setLevel(level)
        lg.disabled = disabled


def assert_nowhere(secrets: dict[str, str], *, logs: EveryRecord, console: str) -> None:
    assert logs.lines, "nothing was logged at all: the capture is not working"
    for name, value in secrets.items():
        assert value, f"the test has no {name} to look for"
        assert value not in logs.text, f"the {name} was logged"
        assert value not in console, f"the {name} was printed"


def login(username: str, password: str) -> tuple[int, str]:
    """A browser login: the status and the session cookie it got ('' if none)."""
    client = client_for(None)
    response = client.post(reverse("login"), {"username": username, "password": password})
    cookie = response.cookies.get("sessionid")
    return response.status_code, cookie.value if cookie is not None else ""


@pytest.mark.django_db(transaction=True)
async def test_login_and_a_socket_answer_log_no_secret(
    every_log_record: EveryRecord,
    capfd: pytest.CaptureFixture[str],
    scripted_worker: RunningWorker,
) -> None:
    await sync_to_async(User.objects.create_user)("erin", password=PASSWORD)
    # A near miss is as secret as the password: it is usually a typo of it.
    typo = PASSWORD[:-1] + "X"
    assert (await sync_to_async(login)("erin", typo))[0] == 200  # the form again, with an error
    status, session = await sync_to_async(login)("erin", PASSWORD)
    assert status == 302

    ws = raw_socket(
        [(b"origin", b"http://localhost"), (b"cookie", f"sessionid={session}".encode())]
    )
    connected, _ = await ws.connect()
    assert connected
    frames = await ask(ws, "what is my order status")
    assert frames[-1]["status"] == "complete"
    await ws.send_json_to({"type": "chat.resume", "id": str(uuid.uuid4()), "message_id": "x"})
    await ws.receive_json_from(timeout=5)  # an invalid frame: a logged-at-most error path
    await ws.disconnect()
    await answer_runtime_close()

    console = "".join(capfd.readouterr())
    assert_nowhere(
        {
            "password": PASSWORD,
            "mistyped password": typo,
            "session cookie": session,
            "SECRET_KEY": settings.SECRET_KEY,
        },
        logs=every_log_record,
        console=console,
    )


def api_key_create_in_admin() -> tuple[str, str]:
    """A superuser adds a key through the admin; returns (the key it showed, the page)."""
    admin = User.objects.create_superuser("root", password="pw-root-123")
    owner = User.objects.create_user("helpdesk-bot")
    page = client_for(admin).post(
        reverse("admin:apikeys_apikey_add"),
        {
            "name": "helpdesk bot",
            "user": str(owner.pk),
            "priority": "interactive",
            "rate_limit": "60",
            "rate_window_s": "60",
            "max_concurrent": "4",
            "_save": "Save",
        },
        follow=True,
    )
    assert page.status_code == 200
    shown = API_KEY.findall(page.content.decode())
    assert len(shown) == 1, "the admin shows the new key exactly once"
    return shown[0], page.content.decode()


@pytest.mark.django_db(transaction=True)
async def test_api_key_creation_and_use_log_no_secret(
    every_log_record: EveryRecord,
    capfd: pytest.CaptureFixture[str],
    scripted_worker: RunningWorker,
) -> None:
    raw_key, _ = await sync_to_async(api_key_create_in_admin)()
    wrong_key = raw_key[:-4] + "AAAA"
    body = {
        "model": settings.CHAT_API_MODEL,
        "messages": [{"role": "user", "content": "hello there"}],
    }
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        answered = await http.post(
            "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {raw_key}"}
        )
        refused = await http.post(
            "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {wrong_key}"}
        )
    await answer_runtime_close()
    assert answered.status_code == 200, answered.text
    assert answered.json()["choices"][0]["message"]["content"] == "You said: hello there"
    assert refused.status_code == 401

    console = "".join(capfd.readouterr())
    assert_nowhere(
        {"API key": raw_key, "mistyped API key": wrong_key, "SECRET_KEY": settings.SECRET_KEY},
        logs=every_log_record,
        console=console,
    )


@pytest.mark.django_db
def test_api_keys_are_stored_as_hashes_only() -> None:
    raw_key, _ = api_key_create_in_admin()
    # ick_<8 hex>_<secret>: the secret is url-safe base64 and may itself hold "_".
    secret_part = raw_key.split("_", 2)[2]
    assert len(secret_part) >= 40

    key = ApiKey.objects.get()
    assert key.key_hash == hashlib.sha256(raw_key.encode()).hexdigest()
    # Not in the key's row, nor anywhere else in the database (admin log, sessions, ...).
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')  # table names come from the schema
            dump = repr(cursor.fetchall())
            assert secret_part not in dump, f"the API key is stored in {table}"
    # Shown once: the key's own admin pages do not show it again.
    admin = client_for(User.objects.get(username="root"))
    for url in (
        reverse("admin:apikeys_apikey_changelist"),
        reverse("admin:apikeys_apikey_change", args=[key.pk]),
    ):
        page = admin.get(url)
        assert page.status_code == 200
        assert secret_part not in page.content.decode()


# ---- a real server at LOG_LEVEL=DEBUG -----------------------------------------------------

SERVER_SETUP = """
import os
from django.core.management import call_command
from django.contrib.auth.models import User
from chatapp.apikeys import services

call_command("migrate", interactive=False, verbosity=0)
user = User.objects.create_user("erin", password=os.environ["PROBE_PASSWORD"])
print(services.api_key_create(user=user, name="probe").secret)
"""


def browser_login(base_url: str, password: str) -> str:
    with httpx.Client(base_url=base_url) as client:
        client.get(reverse("login"))
        answer = client.post(
            reverse("login"),
            data={
                "username": "erin",
                "password": password,
                "csrfmiddlewaretoken": client.cookies["csrftoken"],
            },
        )
        assert answer.status_code == 302, answer.text[:300]
        return str(client.cookies["sessionid"])


def test_a_real_server_at_debug_level_prints_no_secret(tmp_path: Path) -> None:
    """`manage.py serve` as deployed (daphne, LOGGING from settings) with LOG_LEVEL=DEBUG: a
    login, a socket answer and an API call, then everything the process printed is searched.
    The scripted engine and no FAQ embedder keep it to seconds."""
    secret_key = "probe-" + "Qw3rTy-uI9oP_aS5dF" * 3
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")},
        "DJANGO_SETTINGS_MODULE": "chatapp.settings.local",
        "CHAT_DATA_DIR": str(tmp_path),
        "SECRET_KEY": secret_key,
        "DEBUG": "0",
        "LOG_LEVEL": "DEBUG",
        "INFERENCE_ENGINE": "scripted",
        "INFERENCE_FAQ": "0",
        "CHAT_API_MODEL": "probe-model",
        "PROBE_PASSWORD": PASSWORD,
        "PYTHONUNBUFFERED": "1",
    }
    manage = [sys.executable, str(REPO_ROOT / "manage.py")]
    setup = subprocess.run(
        [*manage, "shell", "-c", SERVER_SETUP],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    api_key = setup.stdout.strip().splitlines()[-1]
    assert API_KEY.fullmatch(api_key), setup.stdout
    with app_served(env=env) as served:
        port, base_url, printed = served.port, served.base_url, served.output
        session = browser_login(base_url, PASSWORD)
        with ws_connect(
            f"ws://127.0.0.1:{port}/ws/chat/",
            additional_headers={"Cookie": f"sessionid={session}", "Origin": base_url},
        ) as ws:
            ws.send(json.dumps(send_frame("is my parcel on its way")))
            kinds = [json.loads(ws.recv(timeout=30))["type"] for _ in range(2)]
            while kinds[-1] not in ("chat.done", "chat.error"):
                kinds.append(json.loads(ws.recv(timeout=30))["type"])
            assert kinds[-1] == "chat.done", kinds
        with httpx.Client(base_url=base_url, timeout=30) as http:
            answered = http.post(
                "/v1/chat/completions",
                json={
                    "model": "probe-model",
                    "messages": [{"role": "user", "content": "hello"}],
                },
                headers={"Authorization": f"Bearer {api_key}"},
            )
        assert answered.status_code == 200, answered.text
    output = "".join(printed)
    assert "DEBUG daphne" in output, "LOG_LEVEL=DEBUG did not reach the server's loggers"
    for name, value in {
        "password": PASSWORD,
        "session cookie": session,
        "SECRET_KEY": secret_key,
        "API key": api_key,
    }.items():
        assert value not in output, f"the server printed the {name}"


# ---- production settings ------------------------------------------------------------------

SETTINGS_PROBE = """
import json
import django
from django.conf import settings
from django.core import checks

django.setup()
names = [
    "DEBUG", "SESSION_COOKIE_SECURE", "SESSION_COOKIE_HTTPONLY", "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS", "SECURE_PROXY_SSL_HEADER", "SECURE_SSL_REDIRECT", "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
]
# what `manage.py check --deploy` shows: SILENCED_SYSTEM_CHECKS left out, as it does
issues = [i for i in checks.run_checks(include_deployment_checks=True) if not i.is_silenced()]
print(json.dumps({
    "settings": {name: getattr(settings, name) for name in names},
    "deploy_check_ids": sorted(issue.id for issue in issues),
}))
"""
PRODUCTION_ENV = {
    "SECRET_KEY": "k" + "Zq8-vX_3mN7pR2sT9wY4bC6dF1gH5jL0aE" * 2,
    "ALLOWED_HOSTS": "chat.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://chat.example.com",
}
# Deployment checks that stay opt-in for the operator: including every subdomain in HSTS, and
# the browsers' HSTS preload list, are decisions about the whole domain, not this app.
OPERATOR_CHOICES = {"security.W005", "security.W021"}


def run_production(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    clean = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "CHAT_DATA_DIR": str(tmp_path / "data"),
        "DJANGO_SETTINGS_MODULE": "chatapp.settings.production",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", SETTINGS_PROBE],
        env=clean,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("missing", sorted(PRODUCTION_ENV))
def test_production_refuses_to_start_without(missing: str, tmp_path: Path) -> None:
    env = {name: value for name, value in PRODUCTION_ENV.items() if name != missing}

    started = run_production(env, tmp_path)

    assert started.returncode != 0
    assert "ImproperlyConfigured" in started.stderr
    assert f"{missing} must" in started.stderr


def test_production_refuses_a_guessable_secret_key(tmp_path: Path) -> None:
    started = run_production({**PRODUCTION_ENV, "SECRET_KEY": "changeme"}, tmp_path)

    assert started.returncode != 0
    assert "SECRET_KEY must" in started.stderr


def test_production_settings_are_locked_down(tmp_path: Path) -> None:
    started = run_production(PRODUCTION_ENV, tmp_path)

    assert started.returncode == 0, started.stderr
    report = json.loads(started.stdout)
    values = report["settings"]
    assert values["DEBUG"] is False
    assert values["SESSION_COOKIE_SECURE"] is True
    assert values["SESSION_COOKIE_HTTPONLY"] is True
    assert values["CSRF_COOKIE_SECURE"] is True
    assert values["SECURE_HSTS_SECONDS"] >= 31_536_000
    assert values["SECURE_SSL_REDIRECT"] is True
    assert values["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert values["ALLOWED_HOSTS"] == ["chat.example.com"]
    assert values["CSRF_TRUSTED_ORIGINS"] == ["https://chat.example.com"]
    # Django's own deployment checklist (`manage.py check --deploy`) finds nothing else.
    assert set(report["deploy_check_ids"]) <= OPERATOR_CHOICES, report["deploy_check_ids"]
    assert PRODUCTION_ENV["SECRET_KEY"] not in started.stdout + started.stderr
