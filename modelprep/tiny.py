"""A tiny random-weight Llama built locally in seconds, so tests can run the real vLLM path.

Nothing is downloaded: the tokenizer is a byte-level BPE trained with `tokenizers` on a text
generated here from a fixed seed, and the weights are a seeded random init. The output is
gibberish, but it is deterministic under greedy decoding, and the model exercises what
matters to the pipeline: tokenization with BOS, streaming, stop strings, abort, and prefix
caching (CPU KV blocks are 128 tokens, so a shared prefix needs 128+ tokens to be reused).

Its chat template is SmolLM2's ChatML layout with `<|im_start|>`/`<|im_end|>` as special
tokens, so fast engine tests render prompts the way the real instruct model does.
"""

from __future__ import annotations

import importlib.metadata
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from inference.models.chat_templates import CHATML_END, CHATML_START, CHATML_TEMPLATE
from inference.models.errors import ModelNotReadyError
from inference.models.paths import tiny_model_dir
from inference.models.readiness import ensure_model_ready, write_marker
from modelprep.chatml_check import check_chatml_folder
from modelprep.generation_defaults import write_generation_config
from modelprep.progress import Progress, Steps
from modelprep.publish import build_lock, staged_dir

MODEL_NAME = "tiny-llama"
SEED = 1234
VOCAB_SIZE = 2048
# head_dim 64 is one of the CPU attention backend's head sizes (32, 64, 80, 96, 112, 128, ...)
HIDDEN_SIZE = 128
NUM_HEADS = 2
NUM_LAYERS = 2
MAX_POSITIONS = 8192

# ids 0-4, in this order. "</s>" (the eos before the chat template) keeps id 2 and stays a
# special token, so ids and the injection tests mean what they did; a chat
# turn now ends with <|im_end|>, as in SmolLM2.
_SPECIAL_TOKENS = {"pad_token": "<pad>", "bos_token": "<s>", "eos_token": CHATML_END}
_VOCAB_SPECIALS = ["<pad>", "<s>", "</s>", CHATML_START, CHATML_END]
_EXTRA_SPECIAL_TOKENS = ["</s>", CHATML_START]
_WORD_TEXT = (
    "order account password refund delivery address invoice payment card shipping parcel "
    "return exchange discount coupon subscription cancel change update reset email phone "
    "support agent customer help please thanks hello sorry today tomorrow week days hours "
    "store online app login sign in out page link button settings profile price total "
    "the a an to of and or for with on at from by is are was can will would could should "
    "my your our their it this that these there here what when where why how which who "
    "yes no not do does did have has had get got make made need want see check open choose"
)
_TEMPLATES = (
    "User: {q}\nAssistant: {a}\n",
    "Customer: {q}\nAgent: {a}\n",
    "{a} {q}\n",
)


def build_tiny_model(*, data_dir: Path, progress: Progress = print) -> Path:
    """Make `<data_dir>/models/tiny-llama` ready (a few seconds); a no-op when it already is."""
    target = tiny_model_dir(data_dir=data_dir)
    steps = Steps(label="tiny", progress=progress)
    if _is_ready(target):
        steps.say(f"already prepared at {target}")
        return target
    with build_lock(target=target, progress=steps.say):
        if _is_ready(target):
            steps.say(f"already prepared at {target}")
            return target
        with staged_dir(target=target) as staging:
            _build(staging=staging, steps=steps)
    steps.say(f"ready at {target} ({steps.elapsed_s():.1f}s in all)")
    return target


def _is_ready(target: Path) -> bool:
    try:
        ensure_model_ready(model_dir=target)
    except ModelNotReadyError:
        return False
    return True


def _build(*, staging: Path, steps: Steps) -> None:
    with steps.step("training a byte-level BPE tokenizer on generated text"):
        tokenizer = _train_tokenizer()
        tokenizer.chat_template = CHATML_TEMPLATE
        tokenizer.save_pretrained(str(staging))
    with steps.step("initialising random Llama weights"):
        _save_model(staging=staging, tokenizer=tokenizer)
        write_generation_config(
            model_dir=staging,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=[tokenizer.eos_token_id],
            pad_token_id=tokenizer.pad_token_id,
            # greedy: random weights are only useful to tests when the output is reproducible
            do_sample=False,
            max_new_tokens=32,  # short answers keep the engine tests quick
        )
    with steps.step("checking the chat template and special tokens reload"):
        check_chatml_folder(staging)
    with steps.step("writing prepared.json"):
        write_marker(model_dir=staging, model=MODEL_NAME, source=_source_info())


def _corpus() -> Iterator[str]:
    rng = random.Random(SEED)  # noqa: S311 - a reproducible corpus, not a secret
    words = _WORD_TEXT.split()
    for _ in range(4000):
        question = " ".join(rng.choices(words, k=rng.randint(3, 12))).capitalize() + "?"
        answer = " ".join(rng.choices(words, k=rng.randint(4, 16))).capitalize() + "."
        yield rng.choice(_TEMPLATES).format(q=question, a=answer)


def _train_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    # byte-level: any text (emoji, CJK, control bytes) encodes without <unk>
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=_VOCAB_SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_corpus(), trainer=trainer)
    bos = _SPECIAL_TOKENS["bos_token"]
    backend.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A",
        pair=f"{bos} $A {bos} $B",
        special_tokens=[(bos, backend.token_to_id(bos))],
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        model_max_length=MAX_POSITIONS,
        extra_special_tokens=_EXTRA_SPECIAL_TOKENS,
        **_SPECIAL_TOKENS,
    )
    tokenizer.add_bos_token = True
    return tokenizer


def _save_model(*, staging: Path, tokenizer: Any) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=2 * HIDDEN_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_HEADS,
        head_dim=HIDDEN_SIZE // NUM_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        # wider than the usual 0.02: greedy decoding then yields varied word salad instead of
        # one token repeated, which makes streaming and stop-string tests more meaningful
        initializer_range=0.1,
        dtype="bfloat16",
    )
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(str(staging))


def _source_info() -> dict[str, str]:
    return {
        "generator": "modelprep.tiny",
        "seed": str(SEED),
        "transformers_version": importlib.metadata.version("transformers"),
        "tokenizers_version": importlib.metadata.version("tokenizers"),
    }
