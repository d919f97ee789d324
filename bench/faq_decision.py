"""The FAQ decision on the held-out split: the old lexical guard and the learned verifier.

    .venv/bin/python -m bench.faq_decision [--model-dir DIR]

Trains the verifier (`inference/faq/verifier_training.py`: train split, threshold on the tune
split) into a scratch folder unless `--model-dir` names a trained one, then judges every
held-out pair of `inference/faq/data/labelled_pairs.jsonl` both ways:

- old: cosine >= `matcher.CALIBRATED_THRESHOLD` and the lexical guard passes (the shipped
  rule; note that it was tuned on all of batch 1, held-out pairs included, so its batch-1
  numbers are flattering; batch 2 was written after it);
- verifier: cosine >= its floor and its probability >= its threshold (both chosen on tune);
- guard, widened by the verifier: what the old rule accepts, plus a pair below its cosine
  that the guard passes and the verifier accepts (the verifier's floor and threshold as
  chosen on tune for it alone: nothing is tuned on held-out pairs).

Per kind: pairs, accepted, and the rate with its 95% Wilson interval (recall for
paraphrases, false-hit rate for the rest), for all held-out pairs and for batch 2 alone; and
the verifier's cost per candidate. Tables on stdout and in bench/results/faq_decision-*.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np

from bench import harness
from inference.faq.embedder import Embedder
from inference.faq.labelled_pairs import LabelledPair, load_pairs, of_split
from inference.faq.matcher import CALIBRATED_THRESHOLD, lexical_guard
from inference.faq.verifier import FaqVerifier
from inference.faq.verifier_training import train_verifier

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion (sound at 0 and n, unlike the normal)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


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
            low, high = wilson(hits, len(rows))
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
        "guard widened by verifier": [
            o or (g and v) for o, g, v in zip(old, guard, learned, strict=True)
        ],
    }
    costs = []
    for pair in pairs[:60]:
        started = time.perf_counter()
        verifier.probabilities([(pair.a, pair.b)])
        costs.append((time.perf_counter() - started) * 1000)
    batch2 = [i for i, p in enumerate(pairs) if p.batch == 2]
    lines = [
        f"# FAQ decision on the held-out split ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Command: `{Path(sys.executable).name} -m bench.faq_decision`; verifier threshold "
        f"{threshold:.3f} (chosen on the tune split), trained in {verifier.info.train_s:.0f} s "
        f"on {verifier.info.train_pairs} train pairs (seed {verifier.info.seed}); retrieval "
        f"floor {verifier.info.cosine_floor:.2f} (tune); old guard at cosine "
        f"{CALIBRATED_THRESHOLD:.2f}.",
        f"Verifier cost per candidate: median {harness.median(costs):.1f} ms, "
        f"P95 {harness.percentile(costs, q=0.95):.1f} ms (one pair, 2 CPU threads).",
        "",
        f"## All held-out pairs ({len(pairs)})",
        "",
        *table(pairs, accepted),
    ]
    if batch2:
        lines += [
            "",
            f"## Batch 2 only ({len(batch2)}: written after the old guard, unseen by both)",
            "",
            *table(
                [pairs[i] for i in batch2],
                {m: [v[i] for i in batch2] for m, v in accepted.items()},
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
