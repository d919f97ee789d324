"""The FAQ decision on the held-out split: the old lexical guard and the learned verifier.

    .venv/bin/python -m bench.faq_decision [--model-dir DIR]

Trains the verifier (`inference/faq/verifier_training.py`: train split, threshold on the tune
split) into a scratch folder unless `--model-dir` names a trained one, then judges every
held-out pair of `inference/faq/data/labelled_pairs.jsonl` both ways:

- old: cosine >= `matcher.CALIBRATED_THRESHOLD` and the lexical guard passes (the shipped
  rule; note that it was tuned on all of batch 1, held-out pairs included, so its batch-1
  numbers are flattering; batch 2 was written after it);
- verifier (the shipped decision): cosine >= its floor and its probability >= its threshold
  (both chosen on tune, for a tune false-hit rate whose 95% upper bound is at most 1%);
- verifier with the guard as a veto: what the verifier accepts and the guard passes
  (nothing is tuned on held-out pairs).

Per kind: pairs, accepted, and the rate with its 95% Wilson interval (recall for
paraphrases, false-hit rate for the rest), for all held-out pairs and for batches 2 and 4
alone (written after the guard; batch 4 also after the verifier's recipe was chosen); and
what a lookup's decision costs (the verifier scoring `deciders.MAX_SCORED` candidates in one
batch). Tables on stdout and in bench/results/faq_decision-*.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np

from bench import harness
from inference.faq.deciders import MAX_SCORED, VerifierDecision
from inference.faq.embedder import Embedder
from inference.faq.labelled_pairs import LabelledPair, load_pairs, of_split
from inference.faq.matcher import CALIBRATED_THRESHOLD, Candidate, lexical_guard
from inference.faq.proportions import wilson_interval
from inference.faq.verifier import FaqVerifier
from inference.faq.verifier_training import train_verifier

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def table(pairs: Sequence[LabelledPair], accepted: dict[str, list[bool]]) -> list[str]:
    methods = list(accepted)
    lines = [
        "| kind | pairs | " + " | ".join(f"{m}: accepted, rate [95% CI]" for m in methods) + " |",
        "|---|---:|" + "---|" * len(methods),
    ]
    kinds = sorted({p.kind for p in pairs}, key=lambda k: (k != "paraphrase", k))
    groups = [(kind, [i for i, p in enumerate(pairs) if p.kind == kind]) for kind in kinds]
    groups.append(("all near misses", [i for i, p in enumerate(pairs) if not p.same]))
    for kind, rows in groups:
        cells = []
        for method in methods:
            hits = sum(accepted[method][i] for i in rows)
            low, high = wilson_interval(hits, len(rows))
            cells.append(f"{hits} {hits / max(len(rows), 1):.1%} [{low:.1%}, {high:.1%}]")
        lines.append(f"| {kind} | {len(rows)} | " + " | ".join(cells) + " |")
    for method in methods:
        taken = [i for i, ok in enumerate(accepted[method]) if ok]
        right = sum(pairs[i].same for i in taken)
        lines.append(f"\n{method}: precision {right}/{len(taken)}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--model-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    scratch = tempfile.TemporaryDirectory(prefix="faq-verifier-")
    model_dir = args.model_dir
    if model_dir is None:
        model_dir = Path(scratch.name)
        train_verifier(out_dir=model_dir, say=lambda line: print(line, flush=True))
    verifier = FaqVerifier(model_dir=model_dir)
    pairs = of_split(load_pairs(), "heldout")
    embedder = Embedder()
    texts = sorted({t for p in pairs for t in (p.a, p.b)})
    vectors = embedder.encode(texts)
    row = {text: i for i, text in enumerate(texts)}
    cosine = [float(np.dot(vectors[row[p.a]], vectors[row[p.b]])) for p in pairs]
    probability = verifier.probabilities([(p.a, p.b) for p in pairs])
    threshold = verifier.info.threshold
    guard = [lexical_guard(query=p.b, phrasing=p.a).passed for p in pairs]
    old = [g and c >= CALIBRATED_THRESHOLD for g, c in zip(guard, cosine, strict=True)]
    learned = [
        verifier.accepts(cosine=c, probability=q) for c, q in zip(cosine, probability, strict=True)
    ]
    accepted = {
        "old guard": old,
        "verifier": learned,
        "verifier, guard veto": [v and g for v, g in zip(learned, guard, strict=True)],
    }
    decision = VerifierDecision(verifier=verifier)
    entries = sorted({p.a for p in pairs})
    costs = []
    for pair in pairs[:80]:
        others = [a for a in entries if a != pair.a][: MAX_SCORED - 1]
        candidates = [Candidate(entry_id=i, phrasing=a, score=0.99) for i, a in enumerate(others)]
        candidates.append(Candidate(entry_id=len(others), phrasing=pair.a, score=0.99))
        started = time.perf_counter()
        decision.decide(query=pair.b, candidates=candidates)
        costs.append((time.perf_counter() - started) * 1000)
    info = verifier.info
    own = sorted({p.a for p in pairs})
    repeats = verifier.probabilities([(a, a) for a in own])
    repeats_taken = sum(q >= threshold for q in repeats)
    lines = [
        f"# FAQ decision on the held-out split ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Command: `{Path(sys.executable).name} -m bench.faq_decision "
        f"{' '.join(argv or sys.argv[1:])}`.",
        f"Verifier: trained in {info.train_s:.0f} s ({info.epochs_run} epochs, "
        f"{info.train_examples} examples from {info.train_pairs} train pairs, seed {info.seed}); "
        f"chosen on the tune split: cosine floor {info.cosine_floor:.2f}, threshold "
        f"{threshold:.4f}, for a false-hit upper bound of {info.false_hit_bound:.0%} "
        f"(tune: recall {info.tune_recall:.1%}, {info.tune_false_hits} of "
        f"{info.tune_near_misses} near misses accepted). Old guard at cosine "
        f"{CALIBRATED_THRESHOLD:.2f}.",
        f"The model alone on each held-out entry's own question repeated word for word: "
        f"{repeats_taken} of {len(own)} accepted (the decision takes exact repeats without it).",
        f"Decision cost per question ({MAX_SCORED} candidates in one batch): median "
        f"{harness.median(costs):.1f} ms, P95 {harness.percentile(costs, q=0.95):.1f} ms "
        "(2 CPU threads).",
        "",
        f"## All held-out pairs ({len(pairs)})",
        "",
        *table(pairs, accepted),
    ]
    for batch, about in (
        (2, "written after the old guard"),
        (4, "written after the guard and after the verifier's recipe was chosen"),
    ):
        rows = [i for i, p in enumerate(pairs) if p.batch == batch]
        if rows:
            lines += [
                "",
                f"## Batch {batch} only ({len(rows)} pairs: {about})",
                "",
                *table(
                    [pairs[i] for i in rows],
                    {m: [v[i] for i in rows] for m, v in accepted.items()},
                ),
            ]
    report = "\n".join(lines) + "\n"
    print(report)
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"faq_decision-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}.md"
    out.write_text(report, encoding="utf-8")
    print(f"written to {out}")
    scratch.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
