"""chatapp.prompts.textpatch: exact patches, shared with the browser's src/textpatch.ts.

Cross-language checks run in both suites:

* the committed ``tests/fixtures/patch_vectors.json`` holds, per fixture case, the JS-made and
  the Python-made patch. Here: Python still makes ``py_patch`` (drift), applies ``js_patch``,
  and both are identical. ``npm test`` checks the mirror image.
* ``test_live_cross_check_with_node`` bundles ``frontend/tests/textpatch_cli.ts`` and runs the
  fixture plus a few hundred random edits through node in one batch (skipped without node or
  ``npm ci``).

Regenerate the vectors after changing the fixture or either implementation::

    (cd frontend && npm run vectors)                 # js_patch
    .venv/bin/python -m tests.chatapp.prompts.test_textpatch   # py_patch and hashes
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any, TypedDict

import pytest
from diff_match_patch import diff_match_patch
from hypothesis import given, settings
from hypothesis import strategies as st

from chatapp.prompts.textpatch import (
    MAX_PATCH_CHARS,
    PatchError,
    _to_units,
    apply_patch,
    make_patch,
    sha256_hex,
)

ROOT = Path(__file__).resolve().parents[3]
CASES_PATH = ROOT / "tests" / "fixtures" / "patch_cases.json"
VECTORS_PATH = ROOT / "tests" / "fixtures" / "patch_vectors.json"
FRONTEND = ROOT / "frontend"
REGENERATE = (
    "regenerate: (cd frontend && npm run vectors) && "
    ".venv/bin/python -m tests.chatapp.prompts.test_textpatch"
)


class Case(TypedDict):
    name: str
    base: str
    edited: str


class Vector(TypedDict):
    name: str
    sha256_base: str | None
    sha256_edited: str | None
    js_patch: str | None
    py_patch: str | None


def load_cases() -> list[Case]:
    cases: list[Case] = json.loads(CASES_PATH.read_text("utf-8"))["cases"]
    return cases


def load_vectors() -> dict[str, Vector]:
    if not VECTORS_PATH.exists():
        return {}
    vectors: list[Vector] = json.loads(VECTORS_PATH.read_text("utf-8"))["cases"]
    return {v["name"]: v for v in vectors}


CASES = load_cases()
CASE_IDS = [c["name"] for c in CASES]


def has_astral(text: str) -> bool:
    return any(ord(ch) > 0xFFFF for ch in text)


# --- The fixture itself ----------------------------------------------------------------------


def test_fixture_covers_the_required_ground() -> None:
    assert len(CASES) >= 25
    assert len(set(CASE_IDS)) == len(CASE_IDS)
    texts = [c["base"] + c["edited"] for c in CASES]
    assert sum(has_astral(t) for t in texts) >= 10
    assert any(len(c["base"]) >= 10_000 for c in CASES)
    assert any(c["base"] == "" and c["edited"] for c in CASES)
    assert any(c["edited"] == "" and c["base"] for c in CASES)
    for needle in (
        "\u200d",
        "\U0001f1e8\U0001f1e6",
        "\U0001f3fd",
        "\r\n",
        "\t",
        "%",
        "+",
        "\u05e9",
    ):
        assert any(needle in t for t in texts), needle


# --- Python on its own -----------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_make_then_apply_reproduces_the_edit(case: Case) -> None:
    patch = make_patch(base=case["base"], edited=case["edited"])
    assert patch.isascii()
    assert (patch == "") == (case["base"] == case["edited"])
    assert apply_patch(base=case["base"], patch=patch) == case["edited"]
    expected = hashlib.sha256(case["edited"].encode("utf-8")).hexdigest()
    assert sha256_hex(case["edited"]) == expected


def test_sha256_hex() -> None:
    assert sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_hex("😀") == hashlib.sha256(b"\xf0\x9f\x98\x80").hexdigest()


def test_offsets_count_utf16_code_units() -> None:
    # "😀😀 " is 5 UTF-16 units but 3 code points: the hunk header must say 3 (1-based start of
    # the context " ab"), as JavaScript does, not 2 as stock Python dmp does.
    patch = make_patch(base="😀😀 abc", edited="😀😀 abd")
    assert patch == "@@ -3,6 +3,6 @@\n %F0%9F%98%80 ab\n-c\n+d\n"
    stock = diff_match_patch()
    assert stock.patch_toText(stock.patch_make("😀😀 abc", "😀😀 abd")).startswith(
        "@@ -2,5 +2,5 @@"
    )


def test_stock_dmp_on_unit_strings_splits_surrogate_pairs() -> None:
    # Why _keep_surrogate_pairs exists: 😀 U+1F600 and 😁 U+1F601 share the high surrogate
    # D83D, so the common prefix ends mid-pair and the halves cannot be percent-encoded.
    stock = diff_match_patch()
    diffs = stock.diff_main(_to_units("I feel 😀 today"), _to_units("I feel 😁 today"))
    assert diffs[0] == (0, "I feel \ud83d")
    with pytest.raises(UnicodeEncodeError):
        stock.patch_toText(stock.patch_make(_to_units("I feel 😀"), _to_units("I feel 😁")))
    patch = make_patch(base="I feel 😀 today", edited="I feel 😁 today")
    assert patch == "@@ -4,10 +4,10 @@\n eel \n-%F0%9F%98%80\n+%F0%9F%98%81\n  tod\n"


# Text from pieces that stress surrogate handling: emoji sharing high surrogates, ZWJ, flags.
PIECES = [
    "a", "b", " ", "\n", "\r\n", "\t", "%", "+", "#", "é", "中", "ש",
    "😀", "😁", "😂", "🙂", "🇨🇦", "🇺🇸", "👍🏽", "👩‍👩‍👧", "\U0001d400", "\u200d", "\ufe0f",
]  # fmt: skip
piece_lists = st.lists(st.sampled_from(PIECES), max_size=60)


@settings(max_examples=300, deadline=None)
@given(base=piece_lists, edited=piece_lists)
def test_roundtrip_property(base: list[str], edited: list[str]) -> None:
    b, e = "".join(base), "".join(edited)
    patch = make_patch(base=b, edited=e)
    assert patch.isascii()
    assert apply_patch(base=b, patch=patch) == e


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200), data=st.data())
def test_roundtrip_property_any_unicode(text: str, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(text)))
    edited = (
        text[:cut] + data.draw(st.text(max_size=20)) + text[cut + data.draw(st.integers(0, 5)) :]
    )
    patch = make_patch(base=text, edited=edited)
    assert apply_patch(base=text, patch=patch) == edited


# --- Failures are loud ------------------------------------------------------------------------

BASE = "You are a helpful assistant. 😀 Answer briefly.\nUse {{ language }}."
EDITED = "You are a very helpful assistant. 😁 Answer briefly!\nUse {{ language }} only."


@pytest.mark.parametrize(
    "other_base",
    [
        pytest.param("X" + BASE, id="shifted-by-one"),
        pytest.param(BASE.replace("helpful", "helpfull"), id="changed-inside-hunk"),
        pytest.param(BASE.replace("😀", "😂"), id="different-emoji"),
        pytest.param(EDITED, id="already-applied"),
        pytest.param("", id="empty"),
        pytest.param("Something else entirely.", id="unrelated"),
        pytest.param(BASE[:20], id="truncated"),
    ],
)
def test_patch_for_another_base_raises(other_base: str) -> None:
    patch = make_patch(base=BASE, edited=EDITED)
    with pytest.raises(PatchError):
        apply_patch(base=other_base, patch=patch)


def test_stock_dmp_would_have_relocated_the_patch() -> None:
    # What strict application prevents: dmp's fuzzy patch_apply "succeeds" on a shifted base.
    stock = diff_match_patch()
    text, ok = stock.patch_apply(stock.patch_make(BASE, EDITED), "X" + BASE)
    assert all(ok)
    assert text == "X" + EDITED


@pytest.mark.parametrize(
    "patch",
    [
        pytest.param("garbage", id="no-header"),
        pytest.param("@@ -1,3 +1,3 @@\n*abc\n", id="bad-sign"),
        pytest.param("@@ -1,3 +1,3 @@\n abc", id="no-final-newline"),
        pytest.param("@@ -1,3 +1,3 @@\n abc\n\n", id="blank-line"),
        pytest.param("@@ -1,1 +1,1 @@\n-Y\n+Z\n", id="non-canonical-length-1"),
        pytest.param("@@ -01,2 +01,2 @@\n-Yo\n+Zo\n", id="leading-zero"),
        pytest.param("@@ -1,2 +1,2 @@\n-Y%6f\n+Zo\n", id="needless-escape"),
        pytest.param("@@ -1,3 +1,3 @@\n-Y%23\n+Zo\n", id="escaped-reserved"),
        pytest.param("@@ -1,2 +1,3 @@\n-Y%c3%a9\n+Zo\n", id="lower-case-hex"),
        pytest.param("@@ -1,2 +1,2 @@\n-Yé\n+Zo\n", id="raw-non-ascii"),
        pytest.param("@@ -1,2 +1,2 @@\n-Y%E9\n+Zo\n", id="invalid-utf8"),
        pytest.param("@@ -1,2 +1,2 @@\n-Y%ED%A0%BD\n+Zo\n", id="encoded-surrogate"),
        pytest.param("@@ -1,2 +1,2 @@\n-Y%zz\n+Zo\n", id="bad-escape"),
        pytest.param("@@ -1,2 +1,2 @@\r\n-Yo\r\n+Zo\r\n", id="crlf"),
        pytest.param("@@ -1,5 +1,5 @@\n-Yo\n+Zo\n", id="header-length-mismatch"),
        pytest.param("@@ -0,2 +0,2 @@\n-Yo\n+Zo\n", id="negative-start"),
        pytest.param("@@ -99,0 +99 @@\n+Z\n", id="start-past-end"),
        pytest.param("@@ -\u0661,2 +\u0661,2 @@\n-Yo\n+Zo\n", id="non-ascii-digits"),
        pytest.param("@@ -1," + "9" * 5000 + " +1,2 @@\n-Yo\n+Zo\n", id="huge-number"),
    ],
)
def test_malformed_patch_raises(patch: str) -> None:
    with pytest.raises(PatchError):
        apply_patch(base="Yo there", patch=patch)


def test_canonical_patch_text_is_accepted() -> None:
    assert apply_patch(base="Yo there", patch="@@ -1,2 +1,2 @@\n-Yo\n+Zo\n") == "Zo there"


def test_patch_splitting_a_surrogate_pair_raises() -> None:
    # Inserts "x" between the two UTF-16 units of 😀: structurally fine, semantically not.
    with pytest.raises(PatchError, match="surrogate"):
        apply_patch(base="😀", patch="@@ -1,0 +2 @@\n+x\n")


def test_oversized_patch_raises() -> None:
    patch = make_patch(base="", edited="x" * MAX_PATCH_CHARS)
    assert len(patch) > MAX_PATCH_CHARS  # make_patch still returns it; the caller decides
    with pytest.raises(PatchError, match="longer"):
        apply_patch(base="", patch=patch)


def test_lone_surrogates_are_rejected() -> None:
    with pytest.raises(PatchError):
        make_patch(base="a\ud83d", edited="b")
    with pytest.raises(PatchError):
        make_patch(base="a", edited="\ude00b")
    with pytest.raises(PatchError):
        apply_patch(base="x\ud83d", patch="@@ -1 +1 @@\n-x\n+y\n")


def test_patch_error_is_a_value_error() -> None:
    assert issubclass(PatchError, ValueError)


def test_empty_patch_is_identity() -> None:
    assert apply_patch(base="anything 😀", patch="") == "anything 😀"


# --- Cross-language: committed vectors -------------------------------------------------------


def test_vectors_match_the_fixture() -> None:
    vectors = load_vectors()
    assert list(vectors) == CASE_IDS, f"patch_vectors.json is stale; {REGENERATE}"


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_vectors(case: Case) -> None:
    vector = load_vectors().get(case["name"])
    assert vector is not None, f"no vector for {case['name']}; {REGENERATE}"
    py_patch = make_patch(base=case["base"], edited=case["edited"])
    assert vector["py_patch"] == py_patch, f"Python output drifted; {REGENERATE}"
    assert vector["sha256_base"] == sha256_hex(case["base"])
    assert vector["sha256_edited"] == sha256_hex(case["edited"])
    js_patch = vector["js_patch"]
    assert js_patch is not None, REGENERATE
    # The JS-made patch applies here, and the two sides agree byte for byte.
    assert apply_patch(base=case["base"], patch=js_patch) == case["edited"]
    assert js_patch == py_patch


# --- Cross-language: live, through node ------------------------------------------------------


def random_cases(count: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    for n in range(count):
        size = rng.choice([0, 1, 3, 10, 40, 120]) if n % 10 else rng.randint(200, 600)
        tokens = [rng.choice(PIECES) for _ in range(size)]
        edited = list(tokens)
        for _ in range(rng.randint(0, 6)):
            at = rng.randint(0, len(edited))
            op = rng.random()
            if op < 0.4:
                edited[at:at] = rng.choices(PIECES, k=rng.randint(1, 5))
            elif op < 0.7:
                del edited[at : at + rng.randint(1, 5)]
            else:
                edited[at : at + rng.randint(1, 3)] = rng.choices(PIECES, k=rng.randint(1, 3))
        out.append(("".join(tokens), "".join(edited)))
    return out


def run_node_cli(tmp_path: Path, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the live JS cross-check needs Node 20+")
    esbuild = FRONTEND / "node_modules" / ".bin" / "esbuild"
    if not (FRONTEND / "node_modules" / "diff-match-patch").exists() or not esbuild.exists():
        pytest.skip("frontend dependencies missing: run `npm ci` in frontend/")
    bundle = tmp_path / "textpatch-cli.mjs"
    subprocess.run(
        [
            str(esbuild), "tests/textpatch_cli.ts", "--bundle", "--platform=node", "--format=esm",
            "--target=node20", f"--outfile={bundle}", "--log-level=warning",
        ],
        cwd=FRONTEND, check=True, timeout=120,
    )  # fmt: skip
    done = subprocess.run(
        [node, str(bundle), "stdio"],
        input=json.dumps({"cases": cases}).encode("utf-8"),
        capture_output=True,
        check=True,
        timeout=240,
    )
    results: list[dict[str, Any]] = json.loads(done.stdout)["results"]
    assert len(results) == len(cases)
    return results


def test_live_cross_check_with_node(tmp_path: Path) -> None:
    pairs = [(c["base"], c["edited"]) for c in CASES] + random_cases(400, seed=1)
    patches = [make_patch(base=b, edited=e) for b, e in pairs]
    cases: list[dict[str, Any]] = [
        {"base": b, "edited": e, "patch": p} for (b, e), p in zip(pairs, patches, strict=True)
    ]
    # Python patches sent to the wrong base: JS must reach the same verdict as Python.
    wrong = [("X" + BASE, make_patch(base=BASE, edited=EDITED))]
    wrong += [("X" + b, p) for (b, _), p in zip(pairs[:60], patches[:60], strict=True) if p]
    cases += [{"base": b, "edited": "", "patch": p} for b, p in wrong]
    results = run_node_cli(tmp_path, cases)

    for index, ((base, edited), py_patch) in enumerate(zip(pairs, patches, strict=True)):
        result = results[index]
        where = f"case {index}: base={base[:60]!r} edited={edited[:60]!r}"
        assert result["make_error"] is None, where
        assert result["apply_error"] is None, where
        assert result["applied"] == edited, f"JS applied the Python patch wrongly; {where}"
        js_patch = result["patch"]
        assert apply_patch(base=base, patch=js_patch) == edited, where
        assert js_patch == py_patch, where
        digest = sha256_hex(edited)
        assert result["sha256_subtle"] == digest, where
        assert result["sha256_fallback"] == digest, where
    refused = 0
    for (base, patch), result in zip(wrong, results[len(pairs) :], strict=True):
        try:
            expected: str | None = apply_patch(base=base, patch=patch)
        except PatchError:
            expected = None
        assert result["applied"] == expected, f"base={base[:60]!r} patch={patch[:80]!r}"
        if expected is None:
            refused += 1
            assert result["apply_error"].startswith("PatchError"), result["apply_error"]
    assert results[len(pairs)]["applied"] is None  # the realistic case
    assert refused > len(wrong) // 2


# --- Regenerating the Python half of the vectors ---------------------------------------------


def write_vectors() -> None:
    previous = load_vectors()
    cases: list[Vector] = []
    for case in CASES:
        old = previous.get(case["name"])
        cases.append(
            {
                "name": case["name"],
                "sha256_base": sha256_hex(case["base"]),
                "sha256_edited": sha256_hex(case["edited"]),
                "js_patch": old["js_patch"] if old else None,
                "py_patch": make_patch(base=case["base"], edited=case["edited"]),
            }
        )
    # Same bytes as the JS writer's JSON.stringify(..., null, 2) + "\n".
    text = json.dumps({"cases": cases}, indent=2, ensure_ascii=False) + "\n"
    VECTORS_PATH.write_text(text, "utf-8")
    print(f"wrote py_patch and hashes for {len(cases)} cases")


if __name__ == "__main__":
    write_vectors()
