"""The browser protocol's generated files, derived from the pydantic schemas of every frame
(chatapp/realtime/schemas.py), so the front end keeps no hand-made copy of them:

- frontend/src/generated/frames.ts: TypeScript declarations of every frame (client frames as
  the server accepts them, server frames as the server sends them: every field present), the
  frame `type`s and the `chat.error` codes. frontend/src/protocol.ts builds on them.
- frontend/src/generated/agent_frames.ts: the same for the agent console's socket
  (chatapp/realtime/agent_frames.py).
- frontend/tests/golden/protocol.json: the JSON Schemas and golden frames synthesised from
  them: valid frames of every type (each accepted by pydantic; server frames exactly as the
  server serialises them) and invalid server frames (one field missing, of the wrong type or
  with an unknown value; each refused by pydantic). frontend/tests/golden.test.ts feeds them
  to protocol.ts.

    python -m chatapp.realtime.golden          # `make protocol`: rewrite both files
    python -m chatapp.realtime.golden --check  # exit 1 when either is stale

tests/chatapp/realtime/test_golden_frames.py fails while a committed file is stale. Nothing
here is hand-kept per frame: a new frame, field or error code in schemas.py reaches both files
on the next run. A string field with a `pattern` needs an example in `PATTERN_EXAMPLES`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import core_schema

from chatapp.realtime.agent_frames import agent_client_frame_adapter, agent_server_frame_adapter
from chatapp.realtime.schemas import HEX64, client_frame_adapter, server_frame_adapter

REPO = Path(__file__).resolve().parents[2]
TS_PATH = Path("frontend/src/generated/frames.ts")
GOLDEN_PATH = Path("frontend/tests/golden/protocol.json")
# The agent console's socket (chatapp/realtime/agent_frames.py): its TypeScript declarations.
AGENT_TS_PATH = Path("frontend/src/generated/agent_frames.ts")
COMMAND = "python -m chatapp.realtime.golden"  # or `make protocol`

# A string with a `pattern` cannot be made up from the regex: give one example per pattern.
PATTERN_EXAMPLES: dict[str, str] = {HEX64: "0123456789abcdef" * 4}
# Example texts by field name (any other string field gets "example <name>").
STRING_EXAMPLES: dict[str, str] = {
    "text": "Hello <b>wörld</b> 👋\nline 2",
    "content": "The whole answer so far, with `code` and ünïcode.",
    "message": "Something went wrong.",
}
_UUID_NAMESPACE = uuid.UUID("0f6c2a4e-3b1d-4e5f-8a9b-c0d1e2f3a4b5")
# Values of the wrong JSON type, and the types each one is: one invalid frame each per field
# whose schema allows none of those types (and that pydantic refuses).
_WRONG_VALUES: tuple[tuple[Any, frozenset[str]], ...] = (
    (42, frozenset({"integer", "number"})),
    (1.5, frozenset({"number"})),
    ("x", frozenset({"string"})),
    (None, frozenset({"null"})),
)

Json = Any
Schema = dict[str, Any]


class GoldenError(Exception):
    """The schemas hold something this generator cannot turn into TypeScript or examples."""


class _AsSent(GenerateJsonSchema):
    """Server frames are sent with `model_dump_json()`, which writes every field: in the
    serialisation schema a field with a default is required too."""

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        if self.mode == "serialization":
            return field.get("serialization_exclude_if") is None
        return super().field_is_required(field, total)


# --- reading the JSON Schema ---------------------------------------------------------------


@dataclass(frozen=True)
class _Side:
    """One direction of the protocol: its adapter and JSON Schemas."""

    adapter: TypeAdapter[Any]
    accepted: Schema  # validation mode: what the server accepts (examples are made from it)
    sent: Schema  # serialisation mode, every field required: what the server writes

    @property
    def defs(self) -> dict[str, Schema]:
        defs: dict[str, Schema] = self.accepted.get("$defs", {})
        return defs

    def frames(self) -> dict[str, str]:
        """Frame `type` -> its definition's name, in the union's order."""
        members = self.accepted.get("oneOf") or self.accepted.get("anyOf")
        if not members:
            raise GoldenError("the frame union's JSON Schema has no oneOf")
        out: dict[str, str] = {}
        for member in members:
            name = _ref_name(member)
            literal = self.defs[name]["properties"]["type"]
            if "const" not in literal:
                raise GoldenError(f"{name}.type is not one Literal")
            out[literal["const"]] = name
        return out


def _side(adapter: TypeAdapter[Any]) -> _Side:
    return _Side(
        adapter=adapter,
        accepted=adapter.json_schema(mode="validation"),
        sent=adapter.json_schema(mode="serialization", schema_generator=_AsSent),
    )


def _ref_name(schema: Schema) -> str:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        raise GoldenError(f"expected a $ref to #/$defs/..., got {schema!r}")
    return ref.removeprefix("#/$defs/")


def _resolve(schema: Schema, defs: dict[str, Schema]) -> Schema:
    if "$ref" in schema:
        return _resolve(defs[_ref_name(schema)], defs)
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _resolve(schema["allOf"][0], defs)
    return schema


def _branches(schema: Schema) -> list[Schema]:
    return list(schema.get("anyOf") or schema.get("oneOf") or [schema])


def _is_null(schema: Schema) -> bool:
    return schema.get("type") == "null"


def _non_null(schema: Schema, defs: dict[str, Schema]) -> Schema:
    rest = [b for b in _branches(schema) if not _is_null(b)]
    return _resolve(rest[0], defs) if len(rest) == 1 else schema


# --- examples ------------------------------------------------------------------------------


def _string(schema: Schema, name: str) -> str:
    if schema.get("format") == "uuid":
        return str(uuid.uuid5(_UUID_NAMESPACE, name))
    if "pattern" in schema:
        try:
            return PATTERN_EXAMPLES[schema["pattern"]]
        except KeyError:
            raise GoldenError(
                f"field {name!r} has the pattern {schema['pattern']!r}: add an example for it "
                "to PATTERN_EXAMPLES in chatapp/realtime/golden.py"
            ) from None
    if "format" in schema:
        raise GoldenError(f"field {name!r}: no example for format {schema['format']!r}")
    text = STRING_EXAMPLES.get(name, f"example {name}")
    text = text.ljust(schema.get("minLength", 0), "x")
    return text[: schema.get("maxLength", len(text))]


def _number(schema: Schema, preferred: float, integer: bool) -> float:
    step = 1 if integer else 0.5
    lo = float(schema.get("minimum", schema.get("exclusiveMinimum", -1e300) + step))
    hi = float(schema.get("maximum", schema.get("exclusiveMaximum", 1e300) - step))
    if lo > hi:
        raise GoldenError(f"no number fits {schema!r}")
    return min(max(preferred, lo), hi)


def _example(schema: Schema, defs: dict[str, Schema], name: str, minimal: bool) -> Json:
    """A value `schema` accepts. `minimal`: null where null is allowed, required fields only."""
    schema = _resolve(schema, defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema or "oneOf" in schema:
        branches = _branches(schema)
        if minimal and any(_is_null(b) for b in branches):
            return None
        return _example(next(b for b in branches if not _is_null(b)), defs, name, minimal)
    kind = schema.get("type")
    if kind == "string":
        return _string(schema, name)
    if kind == "integer":
        return int(_number(schema, 7, integer=True))
    if kind == "number":
        return _number(schema, 12.5, integer=False)
    if kind == "boolean":
        return not minimal
    if kind == "null":
        return None
    if kind == "array":
        return [] if minimal else [_example(schema.get("items", {}), defs, name, minimal)]
    if kind == "object":
        if "properties" in schema:
            required = set(schema.get("required", []))
            return {
                key: _example(sub, defs, key, minimal)
                for key, sub in schema["properties"].items()
                if not minimal or key in required
            }
        extra = schema.get("additionalProperties", {})
        if minimal or not isinstance(extra, dict):
            return {}
        return {
            f"{name}_{i + 1}": _example(branch, defs, f"{name}_{i + 1}", minimal)
            for i, branch in enumerate(_branches(extra))
        }
    raise GoldenError(f"field {name!r}: no example for the schema {schema!r}")


def _alternatives(schema: Schema, defs: dict[str, Schema]) -> list[Json]:
    """Every enum value (or both booleans) of a field, and null when it may be null."""
    inner = _non_null(schema, defs)
    values: list[Json] = []
    if "enum" in inner:
        values += inner["enum"]
    elif inner.get("type") == "boolean":
        values += [True, False]
    if any(_is_null(b) for b in _branches(schema)):
        values.append(None)
    return values


def _json_types(schema: Schema, defs: dict[str, Schema]) -> set[str]:
    """The JSON types a value of `schema` may have."""
    schema = _resolve(schema, defs)
    if "anyOf" in schema or "oneOf" in schema:
        return set().union(*(_json_types(b, defs) for b in _branches(schema)))
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        names = {str: "string", bool: "boolean", int: "integer", float: "number"}
        return {names.get(type(v), "null" if v is None else "object") for v in values}
    kind = schema.get("type")
    if isinstance(kind, list):
        return set(kind)
    return {kind} if isinstance(kind, str) else {"string", "number", "integer", "null", "object"}


def _accepts(adapter: TypeAdapter[Any], frame: Json) -> Any | None:
    """The validated frame (parsed from JSON, as the server does), or None when refused."""
    try:
        return adapter.validate_json(json.dumps(frame))
    except ValidationError:
        return None


def _candidates(
    frame_type: str, definition: Schema, defs: dict[str, Schema]
) -> list[tuple[str, Json]]:
    props: dict[str, Schema] = definition["properties"]
    required = set(definition.get("required", [])) | {"type"}
    optional = [key for key in props if key not in required]
    full = {key: _example(sub, defs, key, minimal=False) for key, sub in props.items()}
    minimal = {
        key: _example(sub, defs, key, minimal=True) for key, sub in props.items() if key in required
    }
    out: list[tuple[str, Json]] = [("full", full), ("minimal", minimal)]
    for key in optional:
        out.append((f"minimal with {key}", {**minimal, key: full[key]}))
        out.append((f"full without {key}", {k: v for k, v in full.items() if k != key}))
    for key, sub in props.items():
        if key != "type":
            out += [(f"{key}={json.dumps(v)}", {**full, key: v}) for v in _alternatives(sub, defs)]
    return [(f"{frame_type} {label}", frame) for label, frame in out]


def _valid_frames(side: _Side, *, as_sent: bool) -> list[dict[str, Json]]:
    """Golden frames of every type. `as_sent`: as the server serialises the validated frame
    (server frames); else the frame as the browser would send it (client frames)."""
    out: list[dict[str, Json]] = []
    seen: set[str] = set()
    for frame_type, name in side.frames().items():
        found = 0
        for label, candidate in _candidates(frame_type, side.defs[name], side.defs):
            model = _accepts(side.adapter, candidate)
            if model is None:
                continue
            frame = json.loads(side.adapter.dump_json(model)) if as_sent else candidate
            key = json.dumps(frame, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append({"name": label, "frame": frame})
                found += 1
        if not found:
            raise GoldenError(f"no example of {frame_type} ({name}) passes validation")
    return out


def _invalid_frames(side: _Side, valid: list[dict[str, Json]]) -> list[dict[str, Json]]:
    """Each first golden frame of a type with one field missing, of a wrong type (null
    included), or with a value outside its enum: only those pydantic refuses."""
    out: list[dict[str, Json]] = []
    done: set[str] = set()
    for item in valid:
        base: dict[str, Json] = item["frame"]
        frame_type = base["type"]
        if frame_type in done:
            continue
        done.add(frame_type)
        props = side.defs[side.frames()[frame_type]]["properties"]
        for key in base:
            tries: list[tuple[str, Json]] = [
                ("missing", {k: v for k, v in base.items() if k != key})
            ]
            allowed = _json_types(props[key], side.defs)
            tries += [
                (f"wrong_type {json.dumps(v)}", {**base, key: v})
                for v, kinds in _WRONG_VALUES
                if not kinds & allowed
            ]
            inner = _non_null(props[key], side.defs)
            if "enum" in inner or "const" in inner:
                tries.append(("unknown_value", {**base, key: f"unknown-{key}"}))
            for label, frame in tries:
                if _accepts(side.adapter, frame) is None:
                    out.append(
                        {
                            "name": f"{item['name']}: {key} {label.replace('_', ' ')}",
                            "type": frame_type,
                            "field": key,
                            "mutation": label.split()[0],
                            "frame": frame,
                        }
                    )
    return out


# --- TypeScript ----------------------------------------------------------------------------

_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


def _ts_key(key: str) -> str:
    return key if _IDENT.match(key) else json.dumps(key)


def _ts_union(parts: list[str]) -> str:
    unique = list(dict.fromkeys(parts))
    return " | ".join(unique) if unique else "never"


def _ts_type(schema: Schema, named: dict[tuple[Json, ...], str]) -> str:
    if "$ref" in schema:
        return _ref_name(schema)
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _ts_type(schema["allOf"][0], named)
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    if "enum" in schema:
        values = tuple(schema["enum"])
        if values in named:
            return named[values]
        return _ts_union([json.dumps(v, ensure_ascii=False) for v in values])
    if "anyOf" in schema or "oneOf" in schema:
        return _ts_union([_ts_type(b, named) for b in _branches(schema)])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _ts_union([_ts_type({**schema, "type": k}, named) for k in kind])
    simple = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean"}
    if kind in simple:
        return simple[kind]
    if kind == "null":
        return "null"
    if kind == "array":
        item = _ts_type(schema.get("items", {}), named)
        return f"({item})[]" if " " in item else f"{item}[]"
    if kind == "object":
        if "properties" in schema:
            required = set(schema.get("required", []))
            fields = [
                f"{_ts_key(k)}{'' if k in required else '?'}: {_ts_type(v, named)}"
                for k, v in schema["properties"].items()
            ]
            return "{ " + "; ".join(fields) + " }"
        extra = schema.get("additionalProperties", True)
        value = _ts_type(extra, named) if isinstance(extra, dict) else "unknown"
        return f"{{ [key: string]: {value} }}"
    if not kind and not {"anyOf", "oneOf", "allOf", "not", "if"} & set(schema):
        return "unknown"
    raise GoldenError(f"no TypeScript type for the schema {schema!r}")


def _notes(schema: Schema, with_default: bool) -> str:
    """What the TypeScript type does not say: formats, patterns, bounds, defaults."""
    notes: list[str] = []
    for branch in _branches(schema):
        for key, word in (("format", ""), ("pattern", "pattern ")):
            if key in branch:
                notes.append(f"{word}{branch[key]}")
        for key, word in (
            ("minLength", "min length "),
            ("maxLength", "max length "),
            ("minimum", ">= "),
            ("exclusiveMinimum", "> "),
            ("maximum", "<= "),
            ("exclusiveMaximum", "< "),
        ):
            if key in branch:
                notes.append(f"{word}{branch[key]}")
    if with_default and "default" in schema and "const" not in schema:
        notes.append(f"default {json.dumps(schema['default'], ensure_ascii=False)}")
    return "; ".join(notes)


def _doc(text: str, indent: str = "") -> list[str]:
    lines = text.strip().splitlines()
    if len(lines) == 1:
        return [f"{indent}/** {lines[0].strip()} */"]
    return [
        f"{indent}/**",
        *[f"{indent} * {line.strip()}".rstrip() for line in lines],
        f"{indent} */",
    ]


def _ts_interfaces(
    side: _Side,
    schema: Schema,
    named: dict[tuple[Json, ...], str],
    *,
    with_defaults: bool,
    skip: set[str],
) -> list[str]:
    """One declaration per definition: the frames in the union's order, then the rest."""
    out: list[str] = []
    defs: dict[str, Schema] = schema.get("$defs", {})
    frames = list(side.frames().values())
    for name in [*frames, *sorted(set(defs) - set(frames))]:
        definition = defs[name]
        if name in skip:
            continue
        if definition.get("type") != "object" or "properties" not in definition:
            out += [f"export type {name} = {_ts_type(definition, named)};", ""]
            continue
        if "description" in definition:
            out += _doc(definition["description"])
        out.append(f"export interface {name} {{")
        required = set(definition.get("required", []))
        for key, sub in definition["properties"].items():
            notes = _notes(sub, with_defaults)
            if notes:
                out += _doc(notes, "  ")
            optional = "" if key in required else "?"
            out.append(f"  {_ts_key(key)}{optional}: {_ts_type(sub, named)};")
        out += ["}", ""]
    return out


def _ts_list(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in values) + "]"


def render_ts(
    client: _Side,
    server: _Side,
    error_codes: list[str],
    *,
    source: str = "chatapp/realtime/schemas.py",
    error_type: str = "chat.error",
    built_on: str = "frontend/src/protocol.ts builds on these types; docs/protocol.md",
) -> str:
    named: dict[tuple[Json, ...], str] = {tuple(error_codes): "ErrorCode"}
    client_defs = client.sent.get("$defs", {})
    server_defs = server.sent.get("$defs", {})
    shared = set(client_defs) & set(server_defs)
    for name in shared:
        if client.accepted["$defs"][name] != server_defs[name]:
            raise GoldenError(f"{name} differs between client and server frames: rename one")
    lines = [
        f"// GENERATED from the pydantic schemas in {source} by",
        f"// `{COMMAND}` (or `make protocol`). Do not edit: change the",
        "// schemas and regenerate (tests/chatapp/realtime/test_golden_frames.py fails while",
        "// this is stale).",
        f"// {built_on} describes the frames.",
        "",
        "/** Every `type` a browser may send. */",
        f"export const CLIENT_FRAME_TYPES = {_ts_list(list(client.frames()))} as const;",
        "export type ClientFrameType = (typeof CLIENT_FRAME_TYPES)[number];",
        "",
        "/** Every `type` the server sends. */",
        f"export const SERVER_FRAME_TYPES = {_ts_list(list(server.frames()))} as const;",
        "export type ServerFrameType = (typeof SERVER_FRAME_TYPES)[number];",
        "",
        f"/** Every `code` of a `{error_type}`. */",
        f"export const ERROR_CODES = {_ts_list(error_codes)} as const;",
        "export type ErrorCode = (typeof ERROR_CODES)[number];",
        "",
        "// --- browser -> server: what the server accepts (`?`: may be left out; the default",
        "// applies). Formats and bounds in the comments are checked by the server.",
        "",
        *_ts_interfaces(client, client.accepted, named, with_defaults=True, skip=set()),
        "export type ClientFrame = " + _ts_union(list(client.frames().values())) + ";",
        "",
        "// --- server -> browser: what the server sends (every field is always there).",
        "",
        *_ts_interfaces(server, server.sent, named, with_defaults=False, skip=shared),
        "export type ServerFrame = " + _ts_union(list(server.frames().values())) + ";",
    ]
    return "\n".join(lines) + "\n"


# --- the golden file -----------------------------------------------------------------------


def _dump(value: Json) -> str:
    return json.dumps(value, ensure_ascii=False)


def render_golden(client: _Side, server: _Side, error_codes: list[str]) -> str:
    server_frames = _valid_frames(server, as_sent=True)
    sections: list[tuple[str, str]] = [
        (
            "about",
            _dump(
                "GENERATED from chatapp/realtime/schemas.py by "
                f"`{COMMAND}` (or `make protocol`); do not edit. Frames are checked by "
                "frontend/tests/golden.test.ts (protocol.ts) and "
                "tests/chatapp/realtime/test_golden_frames.py (pydantic)."
            ),
        ),
        ("client_frame_types", _dump(list(client.frames()))),
        ("server_frame_types", _dump(list(server.frames()))),
        ("error_codes", _dump(error_codes)),
    ]
    for key, frames in (
        ("client_frames", _valid_frames(client, as_sent=False)),
        ("server_frames", server_frames),
        ("invalid_server_frames", _invalid_frames(server, server_frames)),
    ):
        body = ",\n".join(f"    {_dump(f)}" for f in frames)
        sections.append((key, f"[\n{body}\n  ]"))
    schemas = {"client": client.accepted, "server": server.sent}
    sections.append(
        ("schema", json.dumps(schemas, indent=2, ensure_ascii=False).replace("\n", "\n  "))
    )
    return "{\n" + ",\n".join(f"  {_dump(k)}: {v}" for k, v in sections) + "\n}\n"


def error_codes_of(server: _Side, error_type: str = "chat.error") -> list[str]:
    error = server.defs[server.frames()[error_type]]
    codes: list[str] = error["properties"]["code"]["enum"]
    return codes


def render(
    client_adapter: TypeAdapter[Any] = client_frame_adapter,
    server_adapter: TypeAdapter[Any] = server_frame_adapter,
) -> dict[Path, str]:
    """The generated files (paths relative to the repository) from these frame unions."""
    client, server = _side(client_adapter), _side(server_adapter)
    codes = error_codes_of(server)
    agent_client, agent_server = (
        _side(agent_client_frame_adapter),
        _side(agent_server_frame_adapter),
    )
    return {
        TS_PATH: render_ts(client, server, codes),
        GOLDEN_PATH: render_golden(client, server, codes),
        AGENT_TS_PATH: render_ts(
            agent_client,
            agent_server,
            error_codes_of(agent_server, "agent.error"),
            source="chatapp/realtime/agent_frames.py",
            error_type="agent.error",
            built_on="frontend/src/console.ts builds on these types; docs/handoff.md",
        ),
    }


def stale(root: Path = REPO) -> list[Path]:
    """The generated files whose committed text differs from a fresh render."""
    out = []
    for path, text in render().items():
        target = root / path
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only report stale files (exit 1)")
    args = parser.parse_args(argv)
    if args.check:
        paths = stale()
        for path in paths:
            print(f"stale: {path} (regenerate: {COMMAND})", file=sys.stderr)
        return 1 if paths else 0
    for path, text in render().items():
        target = REPO / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
