"""The fresh-start bench splits `make run`'s output into timed steps."""

from __future__ import annotations

from bench.fresh_start import steps_of


def test_steps_run_from_one_progress_line_to_the_next_and_the_last_to_ready() -> None:
    stamped = [
        (0.0, "==> Creating the virtualenv and installing (first time: several minutes)"),
        (3.0, "Collecting django"),
        (130.0, "==> Preparing the packaged smollm2 model (once; later runs are instant)"),
        (160.0, "==> Migrating the database"),
        (170.0, "==> Starting (SQLite, in-memory channel layer, worker inside the web process)"),
        (200.0, "Model loaded in 25.0 s."),
        (205.0, "Model loaded in 25.0 s."),  # only the first counts
    ]
    steps = steps_of(stamped, end_s=212.0)
    assert [(s.label, s.took_s) for s in steps] == [
        ("install (venv, pip)", 130.0),
        ("prepare the model", 30.0),
        ("migrate, demo user, examples", 10.0),
        ("start daphne, load the model", 30.0),
        ("FAQ cache, warm-up", 12.0),
    ]


def test_a_run_that_trains_the_verifier_first_shows_it_as_a_step() -> None:
    stamped = [
        (0.0, "==> Preparing the packaged smollm2 model"),
        (30.0, "==> Training the FAQ cache's verifier from the labelled pairs"),
        (1500.0, "==> Migrating the database"),
    ]
    steps = steps_of(stamped, end_s=1510.0)
    assert [(s.label, s.took_s) for s in steps] == [
        ("prepare the model", 30.0),
        ("train the FAQ verifier", 1470.0),
        ("migrate, demo user, examples", 10.0),
    ]
