"""How well the product's two word questions are answered, on texts the models never saw.

    .venv/bin/python -m bench.intents

`chatapp/handoff/intents_training.py` trains each model on the `train` split of its labelled
file in `chatapp/handoff/data/` (its threshold cross-validated there too); this scores the
shipped models (the web process's scorer, `chatapp/handoff/intents.py`) on the held-out
`test` splits, deciding as the product does (`says`: the threshold and the length rule), and
prints precision, recall, every mistake, the training time and the median time of one
decision. Nothing here feeds back into the models: a mistake seen here is fixed by adding
*new* labelled texts to the train split, never by moving test texts or tuning a threshold to
this report.
"""

from __future__ import annotations

import statistics
import time

from chatapp.handoff import intents, intents_training


def report(question: intents.Question) -> None:
    started = time.perf_counter()
    model = intents_training.trained(question)
    trained_s = time.perf_counter() - started
    test = question.labelled("test")
    tp = fp = fn = 0
    for example in test:
        said = model.says(example.text)
        if said and example.positive:
            tp += 1
        elif said:
            fp += 1
            print(f"  wrongly yes: {example.text!r}")
        elif example.positive:
            fn += 1
            print(f"  missed: {example.text!r} ({model.probability(example.text):.2f})")
    times = []
    for example in test:
        t0 = time.perf_counter()
        model.says(example.text)
        times.append((time.perf_counter() - t0) * 1000.0)
    positives = sum(e.positive for e in test)
    print(
        f"{question.name}: held-out {len(test)} texts ({positives} yes); threshold "
        f"{model.threshold:.2f} (from the train split); precision {tp / max(1, tp + fp):.3f} "
        f"({tp}/{tp + fp}), recall {tp / max(1, tp + fn):.3f} ({tp}/{tp + fn}); training "
        f"{trained_s:.2f} s; one decision: median {statistics.median(times):.2f} ms"
    )


def main() -> None:
    for question in intents.QUESTIONS:
        report(question)


if __name__ == "__main__":
    main()
