"""What an API request asks the worker for: the same `GenerateRequest` fields as a chat turn.

OpenAI clients send the whole conversation each time; the worker renders it with the model's
prompt format exactly as it renders a WebSocket conversation. With a template (extension
`template`), the published version's system prompt is the `system` field, byte for byte as
the WebSocket path sends it, so both share one prefix in vLLM's cache; the template's body,
rendered with the variables by `chatapp.prompts.rendering`, is the first user message.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from chatapp.conversations.message_text import TextRefusal, text_refusal
from chatapp.openai_api import sampling as api_sampling
from chatapp.openai_api.errors import ApiError, invalid
from chatapp.openai_api.schemas import ChatCompletionRequest
from chatapp.prompts import selectors as prompt_selectors
from chatapp.prompts.models import PromptTemplateVersion
from chatapp.prompts.rendering import (
    TemplateError,
    ValuesTooLarge,
    clean_values,
    parse_variables,
    render_body,
)
from inference.faq.index import GLOBAL_SCOPE, template_scope
from inference.wire.protocol import ChatTurn, FaqLookup, SamplingOptions

MAX_SYSTEM_CHARS = 100_000  # the wire's limit (inference/wire/protocol.py)


@dataclass(frozen=True, slots=True)
class ApiPrompt:
    system: str | None  # None: the model's default system text
    turns: list[ChatTurn]
    sampling: SamplingOptions
    faq_lookup: FaqLookup | None
    template_version: PromptTemplateVersion | None
    trim_history: bool  # the client opted into trimming (`truncation: "auto"`)

    @property
    def question(self) -> str:
        """The last user message: what the stored conversation shows as asked."""
        return self.turns[-1].content


def prompt_build(request: ChatCompletionRequest) -> ApiPrompt:
    """Check the conversation's shape and resolve the template (reads the database)."""
    version = _template_version(request) if request.template is not None else None
    system_parts: list[str] = []
    turns: list[ChatTurn] = []
    if version is not None:
        body = _template_body(request, version)
        if (refusal := text_refusal(body, max_chars=settings.CHAT_MAX_MESSAGE_CHARS)) is not None:
            raise _refused(refusal, param="template.variables", what="The rendered template: ")
        if body.strip():
            turns.append(ChatTurn(role="user", content=body))
    for index, message in enumerate(request.messages):
        text = message.text()
        system_text = message.role in ("system", "developer")  # their own limit, all together
        limit = MAX_SYSTEM_CHARS if system_text else settings.CHAT_MAX_MESSAGE_CHARS
        if (refusal := text_refusal(text, max_chars=limit)) is not None:
            raise _refused(refusal, param=f"messages[{index}].content")
        if system_text:
            if version is not None:
                raise invalid(
                    "With a template, its system prompt is the system prompt: "
                    "leave out system messages.",
                    param=f"messages[{index}].role",
                )
            if turns:
                raise invalid(
                    "System messages must come before the conversation's first user message.",
                    param=f"messages[{index}].role",
                )
            system_parts.append(text)
            continue
        if not text.strip():
            raise invalid("Messages must not be empty.", param=f"messages[{index}].content")
        turns.append(ChatTurn(role="user" if message.role == "user" else "assistant", content=text))
    if not turns or turns[-1].role != "user":
        raise invalid(
            "The conversation must end with a user message (or start from a template).",
            param="messages",
        )
    system = version.system_prompt if version is not None else None
    if system_parts:
        system = "\n\n".join(system_parts)
        if len(system) > MAX_SYSTEM_CHARS:
            raise invalid(
                f"System messages are limited to {MAX_SYSTEM_CHARS} characters.",
                param="messages",
                code="too_large",
            )
    standalone = len(turns) == 1  # as in chat: only a first question may come from the FAQ
    scopes = [GLOBAL_SCOPE]
    if version is not None:
        scopes.append(template_scope(version.template_id))
    sampling = _sampling(request, version)
    return ApiPrompt(
        system=system,
        turns=turns,
        sampling=sampling,
        faq_lookup=FaqLookup(scopes=scopes)
        if standalone and request.faq and settings.CHAT_FAQ_ENABLED and _faq_can_answer(sampling)
        else None,
        template_version=version,
        trim_history=request.truncation == "auto",
    )


def _faq_can_answer(sampling: SamplingOptions) -> bool:
    """An FAQ entry's answer is fixed text: it has no logprobs, is not JSON, ignores logit
    biases and may hold a stop string. Such requests always go to the model."""
    return (
        sampling.response_format is None
        and sampling.logprobs is None
        and not sampling.logit_bias
        and not sampling.stop
    )


def _template_version(request: ChatCompletionRequest) -> PromptTemplateVersion:
    ref = request.template
    assert ref is not None
    if ref.version is None:
        found = next(
            (v for v in prompt_selectors.published_versions() if v.template_id == ref.id), None
        )
    else:
        found = prompt_selectors.version_get(template_id=ref.id, version=ref.version)
    if found is None:
        raise ApiError(
            status=404,
            type="not_found_error",
            code="template_unknown",
            param="template",
            message=f"Template {ref.id}"
            + (f" version {ref.version}" if ref.version is not None else "")
            + " is not published (or was disabled).",
        )
    if ref.sha256 is not None and ref.sha256 != found.sha256:
        raise invalid(
            f"Template {ref.id} version {found.version} is not the text you expect "
            "(sha256 differs): fetch the current version.",
            param="template.sha256",
            code="template_mismatch",
        )
    return found


def _template_body(request: ChatCompletionRequest, version: PromptTemplateVersion) -> str:
    assert request.template is not None
    try:
        declarations = parse_variables(version.variables)
        values = clean_values(declarations, dict(request.template.variables))
    except (TemplateError, ValuesTooLarge) as exc:
        raise invalid(exc.message, param="template.variables") from exc
    return render_body(version.body, values, declared={v.name for v in declarations})


# The request's sampling fields that `SamplingOptions` names the same
_OWN_NAME_SAMPLING = ("temperature", "top_p", "frequency_penalty", "presence_penalty", "seed")


def _sampling(
    request: ChatCompletionRequest, version: PromptTemplateVersion | None
) -> SamplingOptions:
    values = dict(version.sampling) if version is not None else {}
    asked = request.max_completion_tokens or request.max_tokens
    if asked is not None:
        values["max_tokens"] = asked
    cap = settings.CHAT_MAX_TOKENS
    if cap is not None:
        values["max_tokens"] = min(values.get("max_tokens") or cap, cap)
    for name in _OWN_NAME_SAMPLING:  # what the request says overrides the template
        value = getattr(request, name)
        if value is not None:
            values[name] = value
    stop = api_sampling.stop_of(request)
    if stop:
        values["stop"] = stop
    values["response_format"] = api_sampling.response_format_of(request)
    values["logprobs"] = api_sampling.logprobs_of(request)
    values["logit_bias"] = api_sampling.logit_bias_of(request)
    return SamplingOptions.model_validate(values)


def _refused(refusal: TextRefusal, *, param: str, what: str = "") -> ApiError:
    """A message the stored conversation could not hold, as the API's 400."""
    code = "too_large" if refusal.code == "too_large" else None
    return invalid(f"{what}{refusal.message}", param=param, code=code)
