"""Writes for templates: publishing a version and recording its warm-up."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from chatapp.errors import ApplicationError
from chatapp.prompts import events, selectors
from chatapp.prompts.models import PromptTemplate, PromptTemplateVersion
from chatapp.prompts.rendering import (
    TemplateError,
    canonical_text,
    parse_sampling,
    parse_variables,
    placeholders,
)
from chatapp.prompts.textpatch import sha256_hex
from chatapp.prompts.warmup import WarmupFailed, warm_prefix


class NothingToPublish(ApplicationError):
    code = "invalid"


@transaction.atomic
def template_publish(
    *, template: PromptTemplate, user: User | None, warm: bool = True
) -> PromptTemplateVersion:
    """Snapshot the draft as the next immutable version; warm it and notify open pages.

    `warm=False` (a version published before any worker runs, as the seeded example is):
    no warm-up now; workers warm every published prefix when they start."""
    template = PromptTemplate.objects.select_for_update().get(pk=template.pk)
    variables = parse_variables(template.variables)
    sampling = parse_sampling(template.sampling)
    declared = {v.name for v in variables}
    undeclared = sorted(set(placeholders(template.body)) - declared)
    if undeclared:
        raise TemplateError(f"The body uses undeclared variable(s): {', '.join(undeclared)}.")
    if not template.system_prompt.strip() or not template.body.strip():
        raise TemplateError("A template needs a system prompt and a body.")
    digest = sha256_hex(
        canonical_text(
            system_prompt=template.system_prompt,
            body=template.body,
            variables=variables,
            sampling=sampling,
        )
    )
    latest = selectors.latest_version(template=template)
    if latest is not None and latest.sha256 == digest:
        raise NothingToPublish(f"Nothing changed since version {latest.version}.")
    version = PromptTemplateVersion.objects.create(
        template=template,
        version=(latest.version + 1) if latest else 1,
        sha256=digest,
        system_prompt=template.system_prompt,
        body=template.body,
        variables=[v.model_dump() for v in variables],
        sampling=sampling.model_dump(exclude_none=True),
        published_by=user,
    )
    if warm:
        transaction.on_commit(lambda: _after_publish(version_id=version.pk))
    return version


def _after_publish(*, version_id: int) -> None:
    from chatapp.prompts.tasks import warm_template_version

    events.templates_changed_broadcast(etag=selectors.preload_etag())
    warm_template_version.delay(version_id)


def template_version_warm(*, version_id: int) -> PromptTemplateVersion:
    """Send the version's system prefix through every live worker; record how it went."""
    version = PromptTemplateVersion.objects.get(pk=version_id)
    try:
        result = async_to_sync(warm_prefix)(
            system_prompt=version.system_prompt, timeout_s=settings.CHAT_WARMUP_TIMEOUT_S
        )
    except WarmupFailed as exc:
        version.warm_error = str(exc)[:200]
        version.save(update_fields=["warm_error"])
        return version
    version.warmed_at = timezone.now()
    version.warm_prompt_tokens = result.prompt_tokens
    # some live workers did not answer (one was stopping): the others are warm
    version.warm_error = (
        f"warmed {result.workers} of {result.workers + len(result.failures)} workers: "
        f"{result.failures[0]}"[:200]
        if result.failures
        else ""
    )
    version.save(update_fields=["warmed_at", "warm_prompt_tokens", "warm_error"])
    return version
