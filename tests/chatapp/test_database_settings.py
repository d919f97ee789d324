"""`DATABASES["default"]` from the environment: a bounded pool on PostgreSQL, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from chatapp.settings.database import database_settings

PG = "postgresql://chat@db.internal:5432/chat"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "DATABASE_URL",
        "DB_POOL",
        "DB_POOL_MIN_SIZE",
        "DB_POOL_MAX_SIZE",
        "DB_POOL_TIMEOUT_S",
        "DB_POOL_MAX_IDLE_S",
        "DB_CONNECT_TIMEOUT_S",
        "DB_STATEMENT_TIMEOUT_S",
    ):
        monkeypatch.delenv(name, raising=False)


def test_sqlite_by_default_with_no_connection_kept_per_thread(tmp_path: Path) -> None:
    config = database_settings(data_dir=tmp_path)
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == str(tmp_path / "db.sqlite3")
    assert config["CONN_MAX_AGE"] == 0
    assert "pool" not in config.get("OPTIONS", {})


def test_postgres_gets_a_bounded_checked_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", PG)
    config = database_settings(data_dir=tmp_path)
    # Django refuses a pool with persistent connections; both would keep one per thread
    assert config["CONN_MAX_AGE"] == 0
    assert config["CONN_HEALTH_CHECKS"] is True
    assert config["OPTIONS"]["pool"] == {
        "min_size": 2,
        "max_size": 10,
        "timeout": 5,
        "max_idle": 300,
    }
    assert config["OPTIONS"]["connect_timeout"] == 5
    assert config["OPTIONS"]["options"] == "-c statement_timeout=30000"


def test_pool_size_timeouts_and_off_switch_come_from_the_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", PG)
    monkeypatch.setenv("DB_POOL_MAX_SIZE", "4")
    monkeypatch.setenv("DB_POOL_MIN_SIZE", "1")
    monkeypatch.setenv("DB_POOL_TIMEOUT_S", "0.5")
    monkeypatch.setenv("DB_STATEMENT_TIMEOUT_S", "0")
    config = database_settings(data_dir=tmp_path)
    assert config["OPTIONS"]["pool"]["max_size"] == 4
    assert config["OPTIONS"]["pool"]["min_size"] == 1
    assert config["OPTIONS"]["pool"]["timeout"] == 0.5
    assert "options" not in config["OPTIONS"]  # no statement timeout

    monkeypatch.setenv("DB_POOL", "0")
    assert "pool" not in database_settings(data_dir=tmp_path)["OPTIONS"]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("DB_POOL_MAX_SIZE", "ten", "DB_POOL_MAX_SIZE must be a number"),
        ("DB_POOL_MAX_SIZE", "0", "DB_POOL_MAX_SIZE must be at least 1"),
        ("DB_POOL_MAX_SIZE", "2.5", "DB_POOL_MAX_SIZE must be a whole number"),
        ("DB_POOL_MIN_SIZE", "20", "must not exceed DB_POOL_MAX_SIZE"),
        ("DB_POOL_TIMEOUT_S", "-1", "DB_POOL_TIMEOUT_S must be at least"),
    ],
)
def test_bad_values_are_refused_with_the_variable_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv("DATABASE_URL", PG)
    monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=message):
        database_settings(data_dir=tmp_path)
