"""chatapp/grpc_api/generated/ is protoc's output for chat.proto, never edited by hand."""

from __future__ import annotations

import subprocess
import sys

from tests.integration.processes import REPO_ROOT


def test_the_generated_grpc_code_matches_chat_proto() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "chatapp.grpc_api.codegen", "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
