"""The app's prompt path for benchmarks that talk to something other than our engine.

The worker renders every conversation with the model's own chat template
(`inference/chat_prompt.py`, `inference/prompt_builder.PromptBuilder`) and takes its sampling
defaults from the model folder's `generation_config.json`
(`inference/generation_config.GenerationDefaults`). A benchmark that compares the app with
another server (vLLM's own OpenAI server) or reports the size of the model's prompt needs the
same two things without loading an engine:

* `BenchSampling`: one run's sampling, the model's defaults with an optional max_tokens, as
  explicit request fields for an OpenAI server and as a template's `sampling` for the app;
* `tokenizer_prompt_builder`: the worker's `PromptBuilder` on the model folder's tokenizer
  (transformers only, no vLLM), built by the same function as `VllmEngine` builds its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.generation_config import GenerationDefaults
from inference.prompt_builder import PromptBuilder


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchSampling:
    """The sampling every side of a comparison gets, spelled out (never a server's default)."""

    max_tokens: int
    temperature: float
    top_p: float
    top_k: int  # 0: off
    repetition_penalty: float
    stop: tuple[str, ...]

    @classmethod
    def of_defaults(
        cls, defaults: GenerationDefaults, *, max_tokens: int | None = None
    ) -> BenchSampling:
        return cls(
            max_tokens=max_tokens or defaults.max_tokens,
            temperature=defaults.temperature,
            top_p=defaults.top_p,
            top_k=defaults.top_k,
            repetition_penalty=defaults.repetition_penalty,
            stop=tuple(defaults.stop),
        )

    @classmethod
    def of_model_dir(cls, model_dir: Path, *, max_tokens: int | None = None) -> BenchSampling:
        return cls.of_defaults(GenerationDefaults.from_model_dir(model_dir), max_tokens=max_tokens)

    def template_sampling(self) -> dict[str, Any]:
        """A template's `sampling` (`chatapp.prompts.rendering.Sampling`): what a socket
        conversation started from it is answered with. Stop strings are the model's own,
        which the worker always applies."""
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "repetition_penalty": self.repetition_penalty,
        }

    def openai_fields(self, *, vllm: bool) -> dict[str, Any]:
        """Request fields for `/v1/completions` or `/v1/chat/completions`.

        `vllm`: vLLM's server, which takes `top_k` and `repetition_penalty` as extensions and
        needs the stop strings (it does not read `stop_strings` from generation_config.json;
        it does read the other fields there as defaults, but ignores `do_sample`, so a greedy
        model's temperature 0 must be sent). Our own API refuses those extensions and applies
        the model's stops and repetition penalty itself.
        """
        fields: dict[str, Any] = {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
        }
        if vllm:
            fields["top_k"] = self.top_k if self.top_k > 0 else -1  # as VllmEngine passes it
            fields["repetition_penalty"] = self.repetition_penalty
            if self.stop:
                fields["stop"] = list(self.stop)
        return fields

    def describe(self) -> str:
        stops = ", ".join(repr(s) for s in self.stop) or "none"
        return (
            f"max_tokens {self.max_tokens}, temperature {self.temperature:g}, top_p "
            f"{self.top_p:g}, top_k {self.top_k or 'off'}, repetition_penalty "
            f"{self.repetition_penalty:g}, stop strings {stops}"
        )


def tokenizer_prompt_builder(model_dir: Path, *, context_tokens: int) -> PromptBuilder:
    """The worker's prompt builder for `model_dir`, on its Hugging Face tokenizer (no vLLM).

    `inference.prompt_builder.tokenizer_prompt_builder`, the one `VllmEngine` builds its own
    with, with the operator's `CHAT_TEMPLATE` if set and the context length given instead of
    read from a loaded engine.
    """
    from inference.prompt_builder import folder_prompt_builder
    from inference.settings import EngineSettings

    return folder_prompt_builder(
        model_dir=model_dir,
        context_tokens=context_tokens,
        chat_template=EngineSettings.for_model(model_dir).chat_template(),
    )
