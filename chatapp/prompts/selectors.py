"""Reads for templates: what browsers may preload, and resolving a reference."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from typing import Any

from django.db.models import Max

from chatapp.prompts.models import PromptTemplate, PromptTemplateVersion


def published_versions() -> list[PromptTemplateVersion]:
    """The latest published version of every enabled template, by name."""
    latest = (
        PromptTemplate.objects.filter(enabled=True)
        .annotate(latest=Max("versions__version"))
        .exclude(latest=None)
        .values_list("id", "latest")
    )
    wanted = dict(latest)
    rows = PromptTemplateVersion.objects.select_related("template").filter(template_id__in=wanted)
    return sorted(
        (v for v in rows if wanted.get(v.template_id) == v.version),
        key=lambda v: v.template.name,
    )


def preload_payload(*, template_ids: Collection[int] | None = None) -> dict[str, Any]:
    """What the browser caches: never the system prompt. `template_ids`: only those (a
    website's widget offers its own)."""
    versions = published_versions()
    if template_ids is not None:
        versions = [v for v in versions if v.template_id in template_ids]
    return {
        "templates": [
            {
                "id": v.template_id,
                "name": v.template.name,
                "description": v.template.description,
                "version": v.version,
                "sha256": v.sha256,
                "body": v.body,
                "variables": v.variables,
            }
            for v in versions
        ]
    }


def preload_etag(*, template_ids: Collection[int] | None = None) -> str:
    """Changes whenever the preload payload changes (publish, enable/disable, rename)."""
    payload = json.dumps(
        preload_payload(template_ids=template_ids), sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def version_get(*, template_id: int, version: int) -> PromptTemplateVersion | None:
    """A published version of an enabled template (older versions stay valid: immutable)."""
    return (
        PromptTemplateVersion.objects.select_related("template")
        .filter(template_id=template_id, version=version, template__enabled=True)
        .first()
    )


def latest_version(*, template: PromptTemplate) -> PromptTemplateVersion | None:
    return template.versions.order_by("-version").first()


def latest_published_version(*, template_id: int) -> PromptTemplateVersion | None:
    """The newest published version of an enabled template; None if it has none or is off."""
    return (
        PromptTemplateVersion.objects.select_related("template")
        .filter(template_id=template_id, template__enabled=True)
        .order_by("-version")
        .first()
    )
