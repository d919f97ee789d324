"""Templated sends: a published template (`published` fixture), its values and chat frames."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from chatapp.prompts import services
from chatapp.prompts.models import PromptTemplateVersion
from chatapp.prompts.textpatch import make_patch, sha256_hex
from tests.chatapp.prompts.factories import template_create
from tests.conftest import RunningWorker

VALUES = {"order_id": "A-1042", "remedy": "refund"}
RENDERED = "My order A-1042 has not arrived. I would like a refund."


@pytest.fixture
async def published(scripted_worker: RunningWorker) -> PromptTemplateVersion:
    """A published template; its warm-up goes through the scripted worker."""
    template = await sync_to_async(template_create)()
    return await sync_to_async(services.template_publish)(template=template, user=None)


def ref(version: PromptTemplateVersion) -> dict[str, Any]:
    return {"id": version.template_id, "version": version.version, "sha256": version.sha256}


def templated(version: PromptTemplateVersion, **fields: Any) -> dict[str, Any]:
    return {
        "type": "chat.send",
        "id": str(uuid.uuid4()),
        "conversation_id": None,
        "template": ref(version),
        **fields,
    }


def patched(
    version: PromptTemplateVersion, edited: str, hashed: str | None = None
) -> dict[str, Any]:
    """A templated send of the user's edits to the render: the patch from RENDERED to `edited`
    and the hash of `hashed` (of `edited` itself unless given, as a browser sends it)."""
    return templated(
        version,
        variables=VALUES,
        patch=make_patch(base=RENDERED, edited=edited),
        result_sha256=sha256_hex(edited if hashed is None else hashed),
    )


def full_text(frame: dict[str, Any], text: str) -> dict[str, Any]:
    """A patched send sent again with its whole text, as a browser does when asked to."""
    unpatched = {k: v for k, v in frame.items() if k not in ("patch", "result_sha256")}
    return {**unpatched, "text": text}
