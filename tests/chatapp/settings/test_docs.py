"""docs/configuration.md is generated from the settings and the code that reads each variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatapp.settings import docs


def test_the_configuration_page_is_current() -> None:
    assert docs.PAGE.read_text(encoding="utf-8") == docs.page(), (
        "docs/configuration.md is stale: run `make docs`"
    )


def test_every_variable_the_code_reads_is_on_the_page() -> None:
    on_page = set(docs.table_names(docs.PAGE.read_text(encoding="utf-8")))
    assert {read.name for read in docs.env_reads()} <= on_page


def test_a_new_variable_without_help_stops_the_generator(tmp_path: Path) -> None:
    package = tmp_path / "inference"
    package.mkdir()
    (package / "knob.py").write_text(
        'import os\nLIMIT = int(os.environ.get("INFERENCE_NEW_KNOB", "3"))\n', encoding="utf-8"
    )
    reads = docs.env_reads(tmp_path)
    assert reads == [docs.Read("INFERENCE_NEW_KNOB", "inference/knob.py", "'3'")]
    with pytest.raises(ValueError, match=r"INFERENCE_NEW_KNOB is read in inference/knob\.py"):
        docs.rows(docs.env_reads() + reads)


def test_defaults_come_from_the_code() -> None:
    by_name = {row.name: row for row in docs.rows()}
    # a literal passed where the variable is read
    assert by_name["DB_POOL_MAX_SIZE"].default == "`10`"
    assert by_name["DB_POOL_MAX_SIZE"].where == "`chatapp/settings/database.py`"
    # a pydantic declaration, with its bounds, the web's and the worker's alike
    assert by_name["CHAT_MAX_FRAME_BYTES"].default == "`65536` (≥ 1024)"
    assert by_name["CHAT_TYPING_PREFILL"].default == "`true`"
    assert by_name["VLLM_MAX_NUM_SEQS"].default == "`16` (≥ 1)"
    assert by_name["VLLM_MAX_NUM_SEQS"].where == "`inference/settings.py`"
    # one read under another name than the prefix gives (an alias)
    assert by_name["VLLM_CPU_KVCACHE_SPACE"].default == "`2` (> 0)"
    assert "VLLM_KV_CACHE_GIB" not in by_name


def test_a_helper_read_with_another_default_shows_it(tmp_path: Path) -> None:
    reads = [r for r in docs.env_reads() if r.name != "DB_POOL_MAX_SIZE"]
    reads.append(docs.Read("DB_POOL_MAX_SIZE", "chatapp/settings/database.py", "32"))
    assert {row.name: row.default for row in docs.rows(reads)}["DB_POOL_MAX_SIZE"] == "`32`"
