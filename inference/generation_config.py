"""A model's own sampling defaults, read from its folder's `generation_config.json`.

Instruct models ship the temperature, top_p and repetition penalty they were tuned for there;
our prepared folders add `max_new_tokens`; a folder may also carry `stop_strings`. A request's
own values (a template's sampling, an API client's) win field by field (`inference/worker.py`).
Read as plain JSON: the worker needs no transformers import for it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

FILENAME = "generation_config.json"
# An answer long enough for a real answer (lists, code) when neither model nor request says.
DEFAULT_MAX_TOKENS = 512


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationDefaults:
    max_tokens: int = DEFAULT_MAX_TOKENS
    # transformers' defaults for a folder that says nothing
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off (vLLM's -1)
    repetition_penalty: float = 1.0
    stop: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def from_model_dir(cls, model_dir: Path) -> GenerationDefaults:
        path = model_dir / FILENAME
        try:
            raw: Any = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable %s: %s", path, exc)
            return cls()
        return cls.from_json(raw if isinstance(raw, dict) else {})

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> GenerationDefaults:
        base = cls()
        greedy = raw.get("do_sample") is False  # transformers: do_sample False ignores temperature
        stops = raw.get("stop_strings") or ()
        if isinstance(stops, str):
            stops = (stops,)
        return cls(
            max_tokens=_positive_int(raw.get("max_new_tokens"), base.max_tokens),
            temperature=0.0 if greedy else _number(raw.get("temperature"), base.temperature),
            top_p=_number(raw.get("top_p"), base.top_p),
            top_k=_positive_int(raw.get("top_k"), base.top_k) if not greedy else 0,
            repetition_penalty=_number(raw.get("repetition_penalty"), base.repetition_penalty),
            stop=tuple(s for s in stops if isinstance(s, str) and s),
        )


def _number(value: object, default: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return default


def _positive_int(value: object, default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return default
