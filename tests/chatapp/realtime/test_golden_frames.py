"""The browser protocol's generated files (chatapp/realtime/golden.py) are current, and their
golden frames are what the pydantic schemas accept, refuse and send. The other half is
frontend/tests/golden.test.ts: protocol.ts against the same frames."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, get_args

import pytest
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from chatapp.realtime import golden
from chatapp.realtime.schemas import (
    CLIENT_FRAME_TYPES,
    ERROR_CODES,
    AcceptedFrame,
    AnyServerFrame,
    DeltaFrame,
    ErrorCode,
    client_frame_adapter,
    server_frame_adapter,
)

REGENERATE = "`python -m chatapp.realtime.golden` (or `make protocol`)"


def _committed() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (golden.REPO / golden.GOLDEN_PATH).read_text(encoding="utf-8")
    )
    return data


def test_committed_files_are_current() -> None:
    stale = golden.stale()
    assert not stale, (
        f"{', '.join(map(str, stale))} no longer match chatapp/realtime/schemas.py: "
        f"run {REGENERATE}, then `cd frontend && npm run check`, and commit the result"
    )


def test_golden_server_frames_are_what_the_server_sends() -> None:
    frames = _committed()["server_frames"]
    assert frames
    for item in frames:
        frame = server_frame_adapter.validate_json(json.dumps(item["frame"]))
        assert json.loads(frame.to_json()) == item["frame"], item["name"]


def test_golden_client_frames_are_accepted() -> None:
    frames = _committed()["client_frames"]
    assert frames
    for item in frames:
        client_frame_adapter.validate_json(json.dumps(item["frame"]))


def test_invalid_golden_frames_are_refused() -> None:
    frames = _committed()["invalid_server_frames"]
    assert {f["mutation"] for f in frames} == {"missing", "wrong_type", "unknown_value"}
    for item in frames:
        with pytest.raises(ValidationError):
            server_frame_adapter.validate_json(json.dumps(item["frame"]))


def test_every_frame_type_and_error_code_is_covered() -> None:
    data = _committed()
    server_types = {m.model_fields["type"].default for m in get_args(AnyServerFrame)}
    assert set(data["server_frame_types"]) == server_types
    assert set(data["client_frame_types"]) == CLIENT_FRAME_TYPES
    assert data["error_codes"] == list(get_args(ErrorCode))
    assert {f["frame"]["type"] for f in data["server_frames"]} == server_types
    assert {f["frame"]["type"] for f in data["client_frames"]} == CLIENT_FRAME_TYPES
    error_codes = {f["frame"]["code"] for f in data["server_frames"] if "code" in f["frame"]}
    assert error_codes == ERROR_CODES
    ts = (golden.REPO / golden.TS_PATH).read_text(encoding="utf-8")
    for name in [*data["server_frame_types"], *data["client_frame_types"], *ERROR_CODES]:
        assert f'"{name}"' in ts


class _DeltaWithExtra(DeltaFrame):
    extra: int


class _NewFrame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    type: Literal["chat.new"] = "chat.new"
    value: str


class _ErrorWithNewCode(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    type: Literal["chat.error"] = "chat.error"
    code: Literal[ErrorCode, "new_code"]
    message: str


def test_a_schema_change_reaches_both_files() -> None:
    """A new field, frame type and error code in the schemas: both generated files change
    (so the committed ones are stale) and carry them, with nothing added to golden.py."""
    changed: TypeAdapter[Any] = TypeAdapter(
        Annotated[
            AcceptedFrame | _DeltaWithExtra | _ErrorWithNewCode | _NewFrame,
            Field(discriminator="type"),
        ]
    )
    files = golden.render(server_adapter=changed)
    assert files != golden.render()
    ts = files[golden.TS_PATH]
    assert "  extra: number;" in ts
    assert '"chat.new"' in ts
    assert '"new_code"] as const;' in ts
    data = json.loads(files[golden.GOLDEN_PATH])
    frames = [f["frame"] for f in data["server_frames"]]
    assert any(f["type"] == "chat.delta" and f["extra"] == 7 for f in frames)
    assert any(f["type"] == "chat.new" for f in frames)
    assert any(f["type"] == "chat.error" and f["code"] == "new_code" for f in frames)
    assert data["error_codes"][-1] == "new_code"
    assert any(
        f["type"] == "chat.delta" and f["field"] == "extra" and f["mutation"] == "missing"
        for f in data["invalid_server_frames"]
    )


class _Patterned(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    type: Literal["chat.patterned"] = "chat.patterned"
    code: str = Field(pattern=r"^[A-Z]{3}$")


def test_a_pattern_without_an_example_is_an_error() -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(
        Annotated[_ErrorWithNewCode | _Patterned, Field(discriminator="type")]
    )
    with pytest.raises(golden.GoldenError, match="PATTERN_EXAMPLES"):
        golden.render(server_adapter=adapter)


def test_check_command_reports_a_stale_file(tmp_path: Any) -> None:
    for path, text in golden.render().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    assert golden.stale(tmp_path) == []
    (tmp_path / golden.TS_PATH).write_text("// edited by hand\n", encoding="utf-8")
    assert golden.stale(tmp_path) == [golden.TS_PATH]
