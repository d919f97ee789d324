"""Generate the gRPC code in `generated/` from `chat.proto` (never edit it by hand).

    python -m chatapp.grpc_api.codegen           # after changing chat.proto
    python -m chatapp.grpc_api.codegen --check   # exit 1 if generated/ is stale (a test runs it)

grpcio-tools' protoc writes `chat_pb2.py`, `chat_pb2.pyi` and `chat_pb2_grpc.py`; the last
imports its sibling as a top-level module, which is made a package import here.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO = HERE / "chat.proto"
GENERATED = HERE / "generated"
FILES = ("chat_pb2.py", "chat_pb2.pyi", "chat_pb2_grpc.py")
COMMAND = "python -m chatapp.grpc_api.codegen"


def generate() -> dict[str, str]:
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as out:
        args = [
            "protoc",
            f"-I{HERE}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            str(PROTO),
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed on chat.proto")
        texts = {name: (Path(out) / name).read_text() for name in FILES}
    texts["chat_pb2_grpc.py"] = texts["chat_pb2_grpc.py"].replace(
        "import chat_pb2 as chat__pb2",
        "from chatapp.grpc_api.generated import chat_pb2 as chat__pb2",
    )
    return texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    texts = generate()
    stale = [
        n
        for n, t in texts.items()
        if not (GENERATED / n).is_file() or (GENERATED / n).read_text() != t
    ]
    if args.check:
        if stale:
            print(
                f"stale: {', '.join(stale)}: run python -m chatapp.grpc_api.codegen",
                file=sys.stderr,
            )
            return 1
        return 0
    for name, text in texts.items():
        (GENERATED / name).write_text(text)
    (GENERATED / "__init__.py").write_text('"""Generated from ../chat.proto by codegen.py."""\n')
    print(f"wrote {', '.join(FILES)} in {GENERATED}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
