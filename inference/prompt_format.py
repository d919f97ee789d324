"""How a conversation becomes one prompt string for a completion model.

The served models are base models (or are driven like them): a static system text, a few
example exchanges, then the conversation, each turn on its own line behind a speaker prefix,
ending with the assistant prefix so the model writes the next answer. The system text and
examples come first and never depend on the user, so every prompt of a model starts with the
same bytes and vLLM's prefix cache reuses their KV blocks across users.

Injection guard (deliberately simple): a turn's content is flattened to one line (every line
break, including Unicode ones, becomes a space) and any occurrence of the turn separator is
replaced by a space. A turn can therefore only start where `render` puts a separator, so
"...\\nCustomer: ..." typed by a user stays inside the user's own turn. Special-token text such
as "<eos>" is not handled here: it depends on the tokenizer (see the engine).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from inference.protocol import ChatTurn

CHAT_FORMAT_FILENAME = "chat_format.json"


class PromptFormat(BaseModel):
    """A few-shot prompt layout; stored next to a model as `chat_format.json`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    system: str
    examples: list[tuple[str, str]] = Field(default_factory=list)
    user_prefix: str = Field(min_length=1)
    assistant_prefix: str = Field(min_length=1)
    turn_separator: str = Field(min_length=1)
    stop: list[str] = Field(default_factory=list)
    default_max_tokens: int = Field(ge=1, le=8192)

    @field_validator("stop")
    @classmethod
    def _no_empty_stop(cls, value: list[str]) -> list[str]:
        if any(not item for item in value):
            raise ValueError("stop strings must not be empty")
        return value

    def shared_prefix(self, system: str | None = None) -> str:
        """System text and examples: identical bytes at the start of every prompt.

        `system` replaces the model's default system text (a template's system prompt); the
        examples stay, since base models need them to answer in the right shape.
        """
        parts = [self.system if system is None else system.strip(), self.turn_separator]
        for user, assistant in self.examples:
            parts.append(self._turn(self.user_prefix, user))
            parts.append(self._turn(self.assistant_prefix, assistant))
        return "".join(parts)

    def render(self, messages: Sequence[ChatTurn], *, system: str | None = None) -> str:
        """Shared prefix, then the conversation, then the assistant prefix to be continued.

        The final assistant prefix loses its trailing whitespace: SentencePiece/BPE tokenizers
        attach a word's leading space to the word, and a prompt ending in a lone space token
        derails the model (measured on Gemma 3 270M: numbered lists, HTML, loops). The
        generated answer therefore usually starts with a space that callers may strip.
        """
        parts = [self.shared_prefix(system)]
        for message in messages:
            prefix = self.user_prefix if message.role == "user" else self.assistant_prefix
            parts.append(self._turn(prefix, message.content))
        parts.append(self.assistant_prefix.rstrip())
        return "".join(parts)

    def _turn(self, prefix: str, content: str) -> str:
        return f"{prefix}{self.clean_content(content)}{self.turn_separator}"

    def clean_content(self, content: str) -> str:
        """One line, no separator: user text cannot open a turn of its own."""
        flat = " ".join(line.strip() for line in content.splitlines())
        separator = self.turn_separator.strip()
        if separator:
            flat = flat.replace(separator, " ")
        return flat.strip()


def save_prompt_format(*, model_dir: Path, prompt_format: PromptFormat) -> Path:
    path = model_dir / CHAT_FORMAT_FILENAME
    path.write_text(prompt_format.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path


def load_prompt_format(*, model_dir: Path) -> PromptFormat:
    """Read `chat_format.json`; a missing or invalid file means the model is not prepared."""
    # Imported here: inference.models imports this module to write chat formats.
    from inference.models.errors import ModelNotReadyError

    path = model_dir / CHAT_FORMAT_FILENAME
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return PromptFormat.model_validate(raw)
    except FileNotFoundError as exc:
        raise ModelNotReadyError(model_dir=model_dir, reason=f"{path.name} is missing") from exc
    except (OSError, ValueError, ValidationError) as exc:
        raise ModelNotReadyError(
            model_dir=model_dir, reason=f"{path.name} is unreadable or invalid ({exc})"
        ) from exc
