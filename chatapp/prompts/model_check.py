"""The prefix-cache lint on real tokens: the served model's chat template, when this process
can read the model folder (the embedded default, or a web process with `MODEL` mounted).

`lint.py` reads the system prompt's text; this renders two different conversations with it,
on two different dates, with the model's own chat template and tokenizer, and checks that the
whole system block is their common token prefix (`inference/prefix_check.py`, which the
worker also runs at start). Without the model folder here it says so: every worker still
checks its own template at start.
"""

from __future__ import annotations

import functools
import logging

from inference.chat_prompt import ChatTemplateError
from inference.prefix_check import prefix_report
from inference.prompt_builder import PromptBuilder, folder_prompt_builder
from inference.settings import EngineSettings

logger = logging.getLogger(__name__)


@functools.cache
def _builder() -> PromptBuilder | str:
    """The served model's builder, or why there is none (loaded once per process)."""
    settings = EngineSettings.from_env()
    folder = settings.model_dir
    if not (folder / "tokenizer_config.json").is_file():
        return f"the model folder {folder} is not readable from this process"
    try:
        return folder_prompt_builder(
            model_dir=folder,
            context_tokens=settings.max_model_len,
            chat_template=settings.chat_template(),
        )
    except ImportError:
        return "this process has no tokenizer library (transformers)"
    except (OSError, ValueError, ChatTemplateError) as exc:
        logger.warning("prefix check: cannot load the tokenizer of %s: %s", folder, exc)
        return f"the tokenizer of {folder} could not be loaded ({exc})"


def template_prefix_check(*, system_prompt: str) -> tuple[bool | None, str]:
    """(stable, what to tell the admin); stable None: could not be checked here."""
    builder = _builder()
    if isinstance(builder, str):
        return None, f"Not checked on tokens here: {builder}; every worker checks at start."
    try:
        report = prefix_report(builder, system=system_prompt)
    except ChatTemplateError as exc:
        return False, f"The model's chat template cannot render this system prompt: {exc}"
    if report.stable:
        return True, (
            f"The model's chat template keeps this system prompt a shared prefix "
            f"({report.system_tokens} tokens)."
        )
    return False, report.detail
