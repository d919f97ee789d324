"""The FAQ decision judged as the product makes it: each question against all entries of its FAQ.

    .venv/bin/python -m bench.faq_decision [--model-dir DIR] [--split heldout] [--sweep]

Every set of one split of `modelprep/data/faq_sets/` (`labelled_sets.py`: whole support
FAQs with paraphrases, confusables, near misses and off-topic questions) is judged as the
product decides (`set_judging.py`: each set in its own real `FaqIndex`, each question through
`entry_choice.choose` with the rule in the verifier's `verifier.json`): answered right, with
**another entry's answer** (wrong entry), answered when no entry is right (**false hit**), or
left to the model, maybe with the right entry among the suggestions ("Did you mean ...?").
The lookup's cost is measured through the worker's own `FaqCache.lookup`.

Per set and overall, per kind, with 95% Wilson intervals. `--split tune` is what the rule is
chosen on (`--sweep` prints the grid); held-out is reported once per recipe. Without
`--model-dir` it uses the prepared verifier (`python -m modelprep prepare --model faq-verifier`).
Tables on stdout and in bench/results/faq_decision-*.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"

from bench import harness
from inference.faq.embedder import Embedder
from inference.faq.entry_choice import ChoiceRule
from modelprep.labelled_sets import ANSWERABLE, LabelledSet, load_sets
from modelprep.proportions import wilson_interval
from modelprep.set_judging import ScoredSet, score_sets, tallies

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def rate(hits: int, n: int) -> str:
    if n == 0:
        return "-"
    low, high = wilson_interval(hits, n)
    return f"{hits}/{n} {hits / n:.1%} [{low:.1%}, {high:.1%}]"


def table(sets: Sequence[ScoredSet], rule: ChoiceRule) -> list[str]:
    counts = tallies(sets, rule)
    lines = [
        "| set | kind | recall (answered right) | wrong entry | false hits | "
        "declined but suggested | suggestions shown |",
        "|---|---|---|---|---|---|---|",
    ]
    groups = [s.labelled.name for s in sets] + (["all"] if len(sets) > 1 else [])
    kinds = [*ANSWERABLE, "near_miss", "off_topic", "all"]
    for group in groups:
        for kind in kinds:
            t = counts.get((group, kind))
            if t is None:
                continue
            lines.append(
                f"| {group} | {kind} | {rate(t.right, t.answerable)} | "
                f"{rate(t.wrong_entry, t.answerable)} | {rate(t.false_hits, t.unanswerable)} | "
                f"{rate(t.suggested_right, t.answerable - t.right - t.wrong_entry)} | "
                f"{rate(t.suggested_unanswerable, t.unanswerable)} |"
            )
    return lines


MARGINS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0)


def sweep(sets: Sequence[ScoredSet], rule: ChoiceRule) -> list[str]:
    lines = [
        "| margin | recall | wrong entry | false hits | declined but suggested |",
        "|---:|---|---|---|---|",
    ]
    for margin in MARGINS:
        t = tallies(sets, replace(rule, margin=margin))[("all", "all")]
        lines.append(
            f"| {margin:.1f} | {rate(t.right, t.answerable)} | "
            f"{rate(t.wrong_entry, t.answerable)} | {rate(t.false_hits, t.unanswerable)} | "
            f"{rate(t.suggested_right, t.answerable - t.right - t.wrong_entry)} |"
        )
    return lines


def lookup_costs(
    sets: Sequence[LabelledSet], *, embedder: Embedder, decider: object
) -> list[float]:
    """Milliseconds per question through the worker's own `FaqCache.lookup` (embedding,
    search and decision), for the first set's questions."""
    from inference.faq.cache import FaqCache, vectors_to_wire
    from inference.wire.protocol import FaqEntryData, FaqUpsert

    labelled = sets[0]
    cache = FaqCache(embedder=embedder, decider=decider)  # type: ignore[arg-type]
    vectors = embedder.encode([entry.question for entry in labelled.entries])
    cache.apply(
        FaqUpsert(
            entries=[
                FaqEntryData(
                    entry_id=number,
                    scope="global",
                    answer=entry.answer,
                    phrasings=[entry.question],
                    vectors_b64=vectors_to_wire(vectors[number : number + 1]),
                )
                for number, entry in enumerate(labelled.entries)
            ]
        )
    )

    async def run() -> list[float]:
        costs = []
        for question in labelled.questions:
            started = time.perf_counter()
            await cache.lookup(question=question.text, scopes=["global"])
            costs.append((time.perf_counter() - started) * 1000)
        return costs

    return asyncio.run(run())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--split", choices=("tune", "heldout", "ci"), default="heldout")
    parser.add_argument("--sweep", action="store_true", help="also print recall by margin")
    args = parser.parse_args(argv)
    from inference.faq.deciders import VerifierDecision
    from inference.faq.verifier import FaqVerifier
    from inference.models.paths import default_data_dir, faq_verifier_dir

    model_dir = args.model_dir or faq_verifier_dir(data_dir=default_data_dir())
    verifier = FaqVerifier(model_dir=model_dir)
    decider = VerifierDecision(verifier=verifier)
    rule = decider.rule
    sets = load_sets(split=args.split)
    embedder = Embedder()
    started = time.perf_counter()
    scored = score_sets(sets, embedder=embedder, verifier=verifier)
    scoring_s = time.perf_counter() - started
    costs = lookup_costs(sets, embedder=embedder, decider=decider)
    kinds = Counter(q.kind for s in sets for q in s.questions)
    info = verifier.info
    lines = [
        f"# FAQ decision, whole FAQs, {args.split} sets "
        f"({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Command: `python -m bench.faq_decision {' '.join(argv or sys.argv[1:])}` on "
        f"{harness.machine()}.",
        f"Verifier: {model_dir} ({info.epochs_run} epochs on {info.train_examples} examples, "
        f"{info.train_s:.0f} s, seed {info.seed}); rule: {rule.describe()}.",
        f"Sets: {', '.join(f'{s.name} ({len(s.entries)} entries)' for s in sets)}; questions: "
        + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        + f"; scored in {scoring_s:.0f} s.",
        f"Lookup through `FaqCache.lookup` ({sets[0].name}, {len(costs)} questions): median "
        f"{harness.median(costs):.1f} ms, P95 {harness.percentile(costs, q=0.95):.1f} ms.",
        "",
        *table(scored, rule),
    ]
    if args.sweep:
        lines += ["", "## By margin (the rest of the rule as above)", "", *sweep(scored, rule)]
        lines += [
            "",
            "## Without the margin (the best entry answers if it clears the threshold)",
            "",
            *table(scored, replace(rule, margin=0.0)),
        ]
    report = "\n".join(lines) + "\n"
    print(report)
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"faq_decision-{args.split}-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}.md"
    out.write_text(report, encoding="utf-8")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
