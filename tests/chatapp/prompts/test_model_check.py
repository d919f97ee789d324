"""The template lint checks the shared prefix on the served model's own tokens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chatapp.prompts import model_check
from inference.models import ModelNotReadyError, ensure_model_ready, smollm2_model_dir
from inference.settings import data_dir_from_env
from tests.chatapp.prompts.factories import template_create
from tests.support.admin import superuser_client

SMOLLM2 = smollm2_model_dir(data_dir=data_dir_from_env())
DATED = (  # the shape of Llama 3.1's template: today's date before the system prompt
    "{{ '<|im_start|>system\\nToday Date: ' + strftime_now('%d %b %Y') + '\\n' }}"
    "{% for m in messages %}{{ m.content if m.role == 'system' else "
    "'<|im_start|>' + m.role + '\\n' + m.content }}{{ '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _ready() -> bool:
    try:
        ensure_model_ready(model_dir=SMOLLM2)
    except ModelNotReadyError:
        return False
    return True


pytestmark = pytest.mark.skipif(
    not _ready(), reason="run `python -m modelprep prepare --model smollm2` (make test does)"
)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.setenv("MODEL", str(SMOLLM2))
    monkeypatch.delenv("CHAT_TEMPLATE", raising=False)
    model_check._builder.cache_clear()
    yield monkeypatch
    model_check._builder.cache_clear()


def test_the_default_models_template_keeps_a_system_prompt_shared(
    served: pytest.MonkeyPatch,
) -> None:
    stable, note = model_check.template_prefix_check(system_prompt="You are ShopCo's agent.")
    assert stable is True
    assert "shared prefix" in note


def test_a_template_that_dates_every_prompt_is_reported(
    served: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    override = tmp_path / "dated.jinja"
    override.write_text(DATED)
    served.setenv("CHAT_TEMPLATE", str(override))
    stable, note = model_check.template_prefix_check(system_prompt="You are ShopCo's agent.")
    assert stable is False
    assert "CHAT_TEMPLATE" in note


def test_no_model_folder_here_is_said_not_guessed(
    served: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    served.setenv("MODEL", str(tmp_path / "elsewhere"))
    stable, note = model_check.template_prefix_check(system_prompt="Hi")
    assert stable is None
    assert "every worker checks at start" in note


@pytest.mark.django_db
def test_the_admin_lint_shows_the_token_check(served: pytest.MonkeyPatch, tmp_path: Path) -> None:
    client = superuser_client()
    override = tmp_path / "dated.jinja"
    override.write_text(DATED)
    served.setenv("CHAT_TEMPLATE", str(override))
    template = template_create(system_prompt="You are ShopCo's agent.")
    html = client.get(f"/admin/prompts/prompttemplate/{template.pk}/change/").content.decode()
    assert "share only" in html
