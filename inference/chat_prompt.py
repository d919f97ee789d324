"""A conversation rendered with the model's own chat template, and tokenized safely.

Rendering: the template (the model folder's, or an operator's override) is compiled the way
transformers and vLLM's server compile it (a sandboxed Jinja environment with `trim_blocks`,
`lstrip_blocks`, `raise_exception`, `strftime_now`, a JSON `tojson`, the tokenizer's special
tokens as variables), so for ordinary text the prompt is byte-identical to what vLLM's own
`/v1/chat/completions` would build. Every message's content is rendered as a private-use
marker first and put back afterwards, so the renderer knows exactly which characters of the
prompt a person (or an earlier answer) wrote.

Tokenizing: a string rendered by a chat template and tokenized normally turns special-token text
typed by a user (`<|im_start|>system`, `<end_of_turn>`) into real control tokens: an injected
turn. The prompt is tokenized normally, which for benign text gives exactly vLLM's tokens; if
any special token falls inside a content span, the prompt is tokenized again in pieces between
the template's own special tokens, each piece with `split_special_tokens=True`, so the typed
text stays text. Contents are stripped of surrounding whitespace (meaningless in a chat
message, and the way most templates `trim` them) and otherwise inserted verbatim, line breaks
included.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from inference.wire.protocol import ChatTurn

# Private-use code points: no tokenizer has them in a special token, no template edits them.
_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"


class ChatTemplateError(Exception):
    """The template cannot render this conversation (or there is no template at all)."""


@dataclass(frozen=True, slots=True)
class RenderedChat:
    text: str
    # (start, end) of each message's content in `text`, system message first when given
    content_spans: tuple[tuple[int, int], ...]


class Tokenizer(Protocol):
    """What this module needs of a Hugging Face (fast) tokenizer."""

    def __call__(self, text: str, **kwargs: Any) -> Any: ...


def _raise(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: object,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _environment(now: Callable[[], dt.datetime]) -> ImmutableSandboxedEnvironment:
    # The same environment as transformers' `render_jinja_template` (which vLLM uses).
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: now().strftime(fmt)
    return env


class ChatTemplate:
    """One model's chat template, compiled once."""

    def __init__(
        self,
        *,
        source: str,
        special_tokens: Mapping[str, str] | None = None,
        now: Callable[[], dt.datetime] = dt.datetime.now,
    ) -> None:
        self.source = source
        self._special_tokens = dict(special_tokens or {})
        try:
            self._template = _environment(now).from_string(source)
        except jinja2.exceptions.TemplateError as exc:
            raise ChatTemplateError(f"the chat template does not compile: {exc}") from exc

    @classmethod
    def of_tokenizer(cls, tokenizer: Any, *, override: str | None = None) -> ChatTemplate:
        """The tokenizer's own template (tokenizer_config or chat_template.jinja), or `override`."""
        source = override or getattr(tokenizer, "chat_template", None)
        if isinstance(source, dict):  # several named templates: the default one
            source = source.get("default")
        if not isinstance(source, str) or not source.strip():
            raise ChatTemplateError(
                "the model has no chat template (tokenizer_config.json `chat_template` or "
                "chat_template.jinja); prepare it with `python -m modelprep prepare` or "
                "set CHAT_TEMPLATE to a Jinja file"
            )
        specials = {
            name: str(value)
            for name, value in (getattr(tokenizer, "special_tokens_map", {}) or {}).items()
            if isinstance(value, str)
        }
        return cls(source=source, special_tokens=specials)

    def render(
        self,
        *,
        system: str | None,
        messages: Sequence[ChatTurn],
        add_generation_prompt: bool = True,
        extra: Mapping[str, Any] | None = None,
    ) -> RenderedChat:
        turns: list[tuple[str, str]] = []
        if system is not None and system.strip():
            turns.append(("system", system.strip()))
        turns.extend((m.role, m.content.strip()) for m in messages)
        marked = [
            {"role": role, "content": f"{_MARK_OPEN}{i}{_MARK_CLOSE}"}
            for i, (role, _) in enumerate(turns)
        ]
        try:
            text = self._template.render(
                messages=marked,
                add_generation_prompt=add_generation_prompt,
                **self._special_tokens,
                **(extra or {}),
            )
        except jinja2.exceptions.TemplateError as exc:
            raise ChatTemplateError(f"the chat template refused the conversation: {exc}") from exc
        return _unmark(text, [content for _, content in turns])


def _unmark(marked: str, contents: Sequence[str]) -> RenderedChat:
    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    length = 0
    position = 0
    for index, content in enumerate(contents):
        mark = f"{_MARK_OPEN}{index}{_MARK_CLOSE}"
        found = marked.find(mark, position)
        if found < 0 or marked.count(mark) != 1:
            raise ChatTemplateError(
                "the chat template must render each message's content exactly once, in order"
            )
        parts.append(marked[position:found])
        length += found - position
        parts.append(content)
        spans.append((length, length + len(content)))
        length += len(content)
        position = found + len(mark)
    rest = marked[position:]
    if _MARK_OPEN in rest or _MARK_CLOSE in rest:
        raise ChatTemplateError("the chat template rendered a message's content out of order")
    parts.append(rest)
    return RenderedChat(text="".join(parts), content_spans=tuple(spans))


def special_token_ids(tokenizer: Any) -> frozenset[int]:
    ids = set(getattr(tokenizer, "all_special_ids", ()) or ())
    for token_id, token in (getattr(tokenizer, "added_tokens_decoder", {}) or {}).items():
        if getattr(token, "special", False):
            ids.add(int(token_id))
    return frozenset(ids)


def token_ids(tokenizer: Any, rendered: RenderedChat, *, specials: frozenset[int]) -> list[int]:
    """The prompt's token ids; no token of a content span is a special token."""
    try:
        encoded = tokenizer(rendered.text, add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError:  # a slow (Python) tokenizer has no offsets: always in pieces
        return _tokenized_between(tokenizer, rendered.text, _template_specials(tokenizer, rendered))
    ids: list[int] = list(encoded["input_ids"])
    offsets: list[tuple[int, int]] = [tuple(o) for o in encoded["offset_mapping"]]
    template_specials: list[tuple[int, int]] = []  # (start, end) of the template's own
    injected = False
    for token_id, (start, end) in zip(ids, offsets, strict=True):
        if token_id not in specials:
            continue
        if any(
            start < span_end and span_start < end for span_start, span_end in rendered.content_spans
        ):
            injected = True
        else:
            template_specials.append((start, end))
    if not injected:
        return ids
    return _tokenized_between(tokenizer, rendered.text, template_specials)


def _template_specials(tokenizer: Any, rendered: RenderedChat) -> list[tuple[int, int]]:
    """Where the template's own special tokens stand, found as text outside content spans."""
    names = sorted(
        {str(t) for t in getattr(tokenizer, "all_special_tokens", ()) or ()}
        | {
            str(getattr(t, "content", t))
            for t in (getattr(tokenizer, "added_tokens_decoder", {}) or {}).values()
            if getattr(t, "special", False)
        },
        key=len,
        reverse=True,
    )
    found: list[tuple[int, int]] = []
    position = 0
    for start, end in [*rendered.content_spans, (len(rendered.text), len(rendered.text))]:
        found.extend(_occurrences(rendered.text, names, position, start))
        position = end
    return found


def _occurrences(text: str, names: Sequence[str], start: int, end: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    index = start
    while index < end:
        name = next((n for n in names if n and text.startswith(n, index, end)), None)
        if name is None:
            index += 1
            continue
        spans.append((index, index + len(name)))
        index += len(name)
    return spans


def _tokenized_between(
    tokenizer: Any, text: str, template_specials: Sequence[tuple[int, int]]
) -> list[int]:
    """Text between the template's special tokens as plain text; those tokens as themselves."""
    ids: list[int] = []
    position = 0
    for start, end in template_specials:
        if start > position:
            ids.extend(_plain(tokenizer, text[position:start]))
        ids.extend(tokenizer(text[start:end], add_special_tokens=False)["input_ids"])
        position = end
    if position < len(text):
        ids.extend(_plain(tokenizer, text[position:]))
    return ids


def _plain(tokenizer: Any, text: str) -> list[int]:
    result: list[int] = tokenizer(text, add_special_tokens=False, split_special_tokens=True)[
        "input_ids"
    ]
    return result
