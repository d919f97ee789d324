"""A worker request becomes an engine request: the prompt built, sampling resolved.

Sampling takes the request's value where it gives one (a template's, an API client's), else
the model's own default (its generation_config.json); stop strings are the model's plus the
request's. Building the prompt renders and tokenizes the whole history, so it runs off the
event loop.
"""

from __future__ import annotations

from inference.chat_prompt import ChatTemplateError
from inference.engines.base import EngineRequest, RequestRejectedError
from inference.generation_config import GenerationDefaults
from inference.prompt_builder import PromptBuilder
from inference.wire.protocol import GenerateRequest


def engine_request_of(
    request: GenerateRequest, *, builder: PromptBuilder, defaults: GenerationDefaults
) -> EngineRequest:
    """Raises PromptTooLongError (a last message that does not fit on its own) or
    RequestRejectedError (the chat template refuses the conversation)."""
    sampling = request.sampling
    try:
        if request.continue_from is not None:  # migrated: go on where the last engine stopped
            prompt = builder.build_continuation(
                system=request.system,
                messages=request.messages,
                answer_so_far=request.continue_from,
                max_tokens=sampling.max_tokens or defaults.max_tokens,
                continued_tokens=request.continued_tokens,
                trim=request.trim_history,
            )
        else:
            prompt = builder.build(
                system=request.system,
                messages=request.messages,
                max_tokens=sampling.max_tokens or defaults.max_tokens,
                trim=request.trim_history,
            )
    except ChatTemplateError as exc:
        raise RequestRejectedError(str(exc)) from exc
    schema = None
    if sampling.response_format is not None:
        schema = sampling.response_format.json_schema or {}
    return EngineRequest(
        request_id=request.request_id,
        prompt=prompt.text,
        prompt_token_ids=prompt.token_ids,
        max_tokens=prompt.max_tokens,
        temperature=defaults.temperature if sampling.temperature is None else sampling.temperature,
        top_p=defaults.top_p if sampling.top_p is None else sampling.top_p,
        top_k=defaults.top_k,
        repetition_penalty=defaults.repetition_penalty
        if sampling.repetition_penalty is None
        else sampling.repetition_penalty,
        frequency_penalty=sampling.frequency_penalty,
        presence_penalty=sampling.presence_penalty,
        seed=sampling.seed,
        stop=tuple(dict.fromkeys((*defaults.stop, *sampling.stop))),
        json_schema=schema,
        priority=request.priority,
        logprobs=sampling.logprobs,
        logit_bias=sampling.logit_bias,
        session_id=request.session_id,
    )
