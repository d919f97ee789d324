"""Builders for template tests."""

from __future__ import annotations

from typing import Any

from chatapp.prompts.models import PromptTemplate

SYSTEM = (
    "You are the support assistant of Acme Outdoor. Answer in one or two short sentences, "
    "politely, and never invent order details."
)
BODY = "My order {{order_id}} has not arrived. I would like a {{remedy}}."
VARIABLES: list[dict[str, Any]] = [
    {"name": "order_id", "label": "Order number", "type": "string", "max_length": 20},
    {
        "name": "remedy",
        "label": "What you want",
        "type": "choice",
        "choices": ["refund", "replacement"],
    },
]


def template_create(**overrides: Any) -> PromptTemplate:
    values: dict[str, Any] = {
        "name": "Late order",
        "description": "Ask about an order that did not arrive",
        "system_prompt": SYSTEM,
        "body": BODY,
        "variables": VARIABLES,
        "sampling": {"max_tokens": 40, "temperature": 0.0},
    }
    values.update(overrides)
    return PromptTemplate.objects.create(**values)
