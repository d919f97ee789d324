"""Turn a templated `chat.send` (reference + variables or patch) back into the user's text.

The browser sends only what the server cannot derive. Anything that does not reproduce the
user's text exactly raises `ResendFull`, and the browser resends the full text under the same
client message id, so nothing the user typed is ever lost or altered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from chatapp.errors import ApplicationError
from chatapp.prompts import selectors
from chatapp.prompts.models import PromptTemplateVersion
from chatapp.prompts.rendering import (
    TemplateError,
    clean_values,
    parse_variables,
    render_body,
)
from chatapp.prompts.textpatch import MAX_PATCH_CHARS, PatchError, apply_patch, sha256_hex

ResendReason = Literal["base_mismatch", "patch_failed", "hash_mismatch"]


class TemplateUnknown(ApplicationError):
    code = "template_unknown"


class PatchTooLarge(ApplicationError):
    code = "too_large"


class ResendFull(Exception):
    def __init__(self, reason: ResendReason) -> None:
        super().__init__(reason)
        self.reason: ResendReason = reason


@dataclass(frozen=True, slots=True)
class ResolvedMessage:
    text: str
    version: PromptTemplateVersion


def published_version_get(*, template_id: int, version: int) -> PromptTemplateVersion:
    """A published version of an enabled template; TemplateUnknown if there is none."""
    found = selectors.version_get(template_id=template_id, version=version)
    if found is None:
        raise TemplateUnknown(
            f"Template {template_id} version {version} is not published (or was disabled). "
            "Reload the page to get the current templates."
        )
    return found


def templated_message_resolve(
    *,
    template_id: int,
    version: int,
    sha256: str,
    variables: dict[str, str | int] | None,
    patch: str | None,
    result_sha256: str | None,
    text: str | None,
) -> ResolvedMessage:
    found = published_version_get(template_id=template_id, version=version)
    if found.sha256 != sha256 and text is None:
        # The browser's copy is not the published text: derive nothing from it.
        raise ResendFull("base_mismatch")
    if text is not None:
        final = text
    else:
        declarations = parse_variables(found.variables)
        values = clean_values(declarations, variables)
        final = render_body(found.body, values, declared={v.name for v in declarations})
        if patch is not None:
            if len(patch) > MAX_PATCH_CHARS:
                raise PatchTooLarge(
                    f"The edit is larger than {MAX_PATCH_CHARS} characters; send the text instead."
                )
            try:
                final = apply_patch(base=final, patch=patch)
            except PatchError as exc:
                raise ResendFull("patch_failed") from exc
    # Checked whenever the browser sends it, not only with a patch: a render that differs
    # from the browser's must never silently change what the user meant to send.
    if result_sha256 is not None and sha256_hex(final) != result_sha256:
        raise ResendFull("hash_mismatch")
    if not final.strip():
        raise TemplateError("The message is empty.")
    return ResolvedMessage(text=final, version=found)
