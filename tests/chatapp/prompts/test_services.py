"""Publishing: explicit, immutable, versioned, hashed over the canonical text."""

from __future__ import annotations

import pytest

from chatapp.prompts import selectors, services
from chatapp.prompts.lint import lint_template
from chatapp.prompts.rendering import TemplateError, ValuesTooLarge, clean_values, parse_variables
from tests.chatapp.prompts.factories import BODY, SYSTEM, template_create

pytestmark = pytest.mark.django_db


def test_editing_the_draft_does_not_change_what_users_get_until_published() -> None:
    template = template_create()
    assert selectors.published_versions() == []
    first = services.template_publish(template=template, user=None)
    assert (first.version, first.system_prompt, first.body) == (1, SYSTEM, BODY)
    assert len(first.sha256) == 64

    template.system_prompt = SYSTEM + " Always sign as Sam."
    template.save()
    assert selectors.published_versions()[0].system_prompt == SYSTEM  # draft only

    second = services.template_publish(template=template, user=None)
    assert second.version == 2
    assert second.sha256 != first.sha256
    first.refresh_from_db()
    assert first.system_prompt == SYSTEM  # versions are immutable snapshots
    assert [v.version for v in selectors.published_versions()] == [2]


def test_publishing_an_unchanged_draft_is_refused() -> None:
    template = template_create()
    services.template_publish(template=template, user=None)
    with pytest.raises(services.NothingToPublish, match="Nothing changed since version 1"):
        services.template_publish(template=template, user=None)


def test_the_hash_is_over_a_canonical_text_and_stable() -> None:
    one = services.template_publish(template=template_create(name="a"), user=None)
    two = services.template_publish(template=template_create(name="b"), user=None)
    assert one.sha256 == two.sha256  # same content, same hash, whatever the name


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"body": "Order {{order}} is late"}, "undeclared"),
        ({"variables": [{"name": "Bad Name"}]}, "Invalid variables"),
        ({"variables": [{"name": "x", "type": "choice"}]}, "lists no choices"),
        ({"sampling": {"temperature": 9}}, "Invalid sampling"),
        ({"system_prompt": "  "}, "needs a system prompt"),
    ],
)
def test_a_broken_draft_is_not_published(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        services.template_publish(template=template_create(**overrides), user=None)
    assert selectors.published_versions() == []


def test_disabled_templates_are_not_offered() -> None:
    template = template_create()
    services.template_publish(template=template, user=None)
    template.enabled = False
    template.save()
    assert selectors.published_versions() == []
    assert selectors.version_get(template_id=template.pk, version=1) is None


def test_lint_flags_volatile_content_in_the_shared_prefix() -> None:
    warnings = lint_template(
        system_prompt="Today is 2026-11-29, it is 14:05. Greet {{user_name}} by name.",
        body="Hi {{order_id}}",
        declared={"order_id"},
    )
    text = " ".join(warnings)
    assert "{{user_name}}" in text
    assert "'2026-11-29'" in text
    assert "'14:05'" in text
    assert "current date or time" in text
    assert lint_template(system_prompt=SYSTEM, body=BODY, declared={"order_id", "remedy"}) == []


def test_variable_values_are_validated_by_type() -> None:
    variables = parse_variables(
        [
            {"name": "order_id", "max_length": 5},
            {"name": "qty", "type": "integer"},
            {"name": "remedy", "type": "choice", "choices": ["refund"]},
            {"name": "note", "required": False},
        ]
    )
    good = {"order_id": "A1", "qty": 3, "remedy": "refund"}
    assert clean_values(variables, good) == {**good, "note": ""}
    with pytest.raises(TemplateError, match="required"):
        clean_values(variables, {"qty": 3, "remedy": "refund"})
    with pytest.raises(TemplateError, match="whole number"):
        clean_values(variables, {**good, "qty": "3"})
    with pytest.raises(TemplateError, match="one of the choices"):
        clean_values(variables, {**good, "remedy": "cash"})
    with pytest.raises(TemplateError, match="Unknown variable"):
        clean_values(variables, {**good, "sneaky": "x"})
    with pytest.raises(ValuesTooLarge):
        clean_values(variables, {**good, "order_id": "A" * 6})
