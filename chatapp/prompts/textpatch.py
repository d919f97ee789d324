"""Edits of a prompt text as diff-match-patch patches, byte-compatible with the browser.

The browser (``frontend/src/textpatch.ts``, npm ``diff-match-patch`` 1.0.5) and this module
(PyPI ``diff-match-patch`` 20241021) make and apply the same patches. The shared fixture
``tests/fixtures/patch_cases.json`` and ``tests/fixtures/patch_vectors.json`` pin that both
produce byte-identical patch text, and both test suites apply the other side's patches.

Wire format
-----------
A patch is exactly what dmp's ``patch_toText`` writes, computed over **UTF-16 code units**:

* Hunk headers ``@@ -s1,l1 +s2,l2 @@`` count UTF-16 code units (JavaScript string indices),
  never code points. Python therefore diffs a "unit string" (:func:`_to_units`): each UTF-16
  code unit becomes one character, so an emoji is two lone-surrogate characters, exactly as
  in a JS string. Results are converted back with :func:`_from_units`.
* Body lines are ``+``/``-``/`` `` followed by the text percent-encoded like JavaScript's
  ``encodeURI`` (UTF-8 bytes, upper-case hex, ``%20`` written as a space). The text is
  therefore pure ASCII.
* No diff, context or hunk boundary ever falls between the two halves of a surrogate pair.
  Stock dmp does split pairs (its common-prefix scan stops after the shared high surrogate of
  😀 U+1F600 and 😁 U+1F601, and its 4-unit context can start mid-emoji). JS ``encodeURI``
  then throws ``URIError`` on the lone half, and Python's ``utf-8`` encode throws too. Both
  sides fix this the same way: :func:`_keep_surrogate_pairs` grows an edit region by one unit
  wherever its edge splits a pair, and :meth:`_Dmp.patch_addContext` grows the context the
  same way.
* Only the canonical text is accepted: a patch must re-serialise to exactly the received
  string. That rejects non-canonical escapes (``%23``, lower-case hex, raw non-ASCII, blank
  lines), which ``urllib.parse.unquote`` and JS ``decodeURI`` would decode differently.

Making patches
--------------
``make_patch`` runs dmp's ``patch_make`` pipeline (``diff_main`` with line mode,
``diff_cleanupSemantic``, ``diff_cleanupEfficiency``, ``Diff_Timeout`` 1 s), with four parts
aligned to the JS 1.0.5 behaviour (see :class:`_Dmp`). Identical output is a
convenience and a drift alarm, not a correctness requirement. A patch is correct when the
strict apply below turns ``base`` into ``edited``, and ``make_patch`` checks that itself.
Only a diff that hits the 1 s deadline (huge rewrites) may differ between the two sides, and
such a patch is still exact.

Applying patches
----------------
``apply_patch`` does not use dmp's fuzzy ``patch_apply``. Each hunk must match the text
exactly at its stated position ``s2``, counted in the text as patched so far (dmp's "rolling
context"). For a patch made from the same base this is what dmp's ``patch_apply`` does too. Any
hunk that does not match raises :class:`PatchError`, so a partial or relocated result is never
returned (dmp's ``patch_apply`` would move the hunk to a nearby match and report success).
A patch only pins the text its hunks cover, including up to 4 units of context on each side.
A base that differs elsewhere, or any base for a patch made against ``""``, can still apply.
Callers verify :func:`sha256_hex` of the result, as the server does. The JS ``applyPatch``
follows the same rules.
"""

from __future__ import annotations

import hashlib
import re
import sys
import urllib.parse
from array import array
from dataclasses import dataclass
from typing import Final

from diff_match_patch import diff_match_patch

__all__ = ["MAX_PATCH_CHARS", "PatchError", "apply_patch", "make_patch", "sha256_hex"]

MAX_PATCH_CHARS: Final = 16_000

_DELETE: Final = -1
_EQUAL: Final = 0
_INSERT: Final = 1

# With urllib's always-safe set (letters, digits, "_.-~") this is exactly what JS encodeURI
# leaves alone, plus the space that dmp's JS toString turns back from "%20".
_URI_SAFE: Final = "!~*'();/?:@&=+$,# "

# JS 1.0.5 diff_cleanupSemanticLossless: /[^a-zA-Z0-9]/ and /\s/. \s = WhiteSpace (incl. Zs) +
# LineTerminator, fixed by ECMAScript; Python's isalnum()/isspace() are Unicode-wide instead.
_JS_ALNUM: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_JS_SPACE: Final = frozenset(
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_BLANKLINE_END: Final = re.compile(r"\n\r?\n\Z")
_BLANKLINE_START: Final = re.compile(r"\A\r?\n\r?\n")

Diff = tuple[int, str]


class PatchError(ValueError):
    """The patch is malformed, too large, or does not apply exactly to the base text."""


def sha256_hex(text: str) -> str:
    """SHA-256 of the UTF-8 bytes, lowercase hex (``sha256Hex`` in the browser)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_patch(*, base: str, edited: str) -> str:
    """Patch text turning ``base`` into ``edited``; ``""`` when they are equal.

    Raises :class:`PatchError` when either text is not valid Unicode (lone surrogates).
    The result may exceed :data:`MAX_PATCH_CHARS`; callers then send the full text.
    """
    _require_scalar_text(base, "base")
    _require_scalar_text(edited, "edited")
    if base == edited:
        return ""
    units1, units2 = _to_units(base), _to_units(edited)
    dmp = _Dmp()
    diffs: list[Diff] = dmp.diff_main(units1, units2, True)
    if len(diffs) > 2:
        dmp.diff_cleanupSemantic(diffs)
        dmp.diff_cleanupEfficiency(diffs)
    hunks = dmp.make_hunks(units1, _keep_surrogate_pairs(units1, units2, diffs))
    # Cheap insurance: never hand out a patch that would not reproduce `edited` exactly.
    try:
        text = _serialize(hunks)
        ok = _apply_hunks(units1, _parse(text)) == units2
    except (UnicodeError, PatchError) as exc:
        raise PatchError(f"internal error: the computed patch is invalid ({exc})") from exc
    if not ok:
        raise PatchError("internal error: the computed patch does not reproduce the edit")
    return text


def apply_patch(*, base: str, patch: str) -> str:
    """Apply ``patch`` (from :func:`make_patch` or the browser's ``makePatch``) to ``base``.

    Every hunk must match exactly; otherwise, or when the patch is malformed, non-canonical or
    longer than :data:`MAX_PATCH_CHARS`, raises :class:`PatchError`.
    """
    if len(patch) > MAX_PATCH_CHARS:
        raise PatchError(f"patch is longer than {MAX_PATCH_CHARS} characters")
    _require_scalar_text(base, "base")
    if patch == "":
        return base
    units = _apply_hunks(_to_units(base), _parse(patch))
    try:
        return _from_units(units)
    except UnicodeDecodeError as exc:
        raise PatchError("patch splits a surrogate pair of the base text") from exc


# --- UTF-16 unit strings -----------------------------------------------------------------


def _to_units(text: str) -> str:
    """One character per UTF-16 code unit (astral characters become two surrogates)."""
    if not text or max(text) <= "\uffff":
        return text  # BMP-only: code points already are code units.
    codes = array("H", text.encode("utf-16-le"))
    if sys.byteorder == "big":
        codes.byteswap()
    return "".join(map(chr, codes))


def _from_units(units: str) -> str:
    """Inverse of :func:`_to_units`; raises ``UnicodeDecodeError`` on an unpaired surrogate."""
    return units.encode("utf-16-le", "surrogatepass").decode("utf-16-le")


def _require_scalar_text(text: str, name: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PatchError(f"{name} contains an unpaired surrogate") from exc


def _is_high(unit: str) -> bool:
    return "\ud800" <= unit <= "\udbff"


def _is_low(unit: str) -> bool:
    return "\udc00" <= unit <= "\udfff"


def _splits_pair(units: str, pos: int) -> bool:
    return 0 < pos < len(units) and _is_high(units[pos - 1]) and _is_low(units[pos])


# --- Keeping surrogate pairs whole (mirrored in textpatch.ts) --------------------------------


@dataclass(slots=True)
class _Region:
    """A maximal run of non-equal diffs: ``units1[a1:b1]`` became ``units2[a2:b2]``."""

    a1: int
    a2: int
    b1: int
    b2: int
    diffs: list[Diff]
    rebuild: bool = False


def _keep_surrogate_pairs(units1: str, units2: str, diffs: list[Diff]) -> list[Diff]:
    """Move region edges off the middle of surrogate pairs.

    An edge that splits a pair takes the neighbouring unit from the adjacent equality, which
    is the same in both texts. One step is always enough: the unit taken is a high surrogate
    at a left edge and a low surrogate at a right edge, and neither can start a split. Regions
    whose equality is used up merge. Changed regions become one delete plus one insert.
    Untouched regions keep dmp's diffs, so BMP-only texts get stock dmp output.
    """
    regions: list[_Region] = []
    i1 = i2 = 0
    current: _Region | None = None
    for op, text in diffs:
        if op == _EQUAL:
            current = None
            i1 += len(text)
            i2 += len(text)
            continue
        if current is None:
            current = _Region(a1=i1, a2=i2, b1=i1, b2=i2, diffs=[])
            regions.append(current)
        current.diffs.append((op, text))
        if op == _DELETE:
            i1 += len(text)
        else:
            i2 += len(text)
        current.b1, current.b2 = i1, i2

    merged: list[_Region] = []
    for region in regions:
        # A diff that starts with a low or ends with a high surrogate splits a pair inside
        # the region (between its delete and insert runs).
        region.rebuild = any(
            text and (_is_low(text[0]) or _is_high(text[-1])) for _, text in region.diffs
        )
        if _splits_pair(units1, region.a1) or _splits_pair(units2, region.a2):
            region.a1 -= 1
            region.a2 -= 1
            region.rebuild = True
        if _splits_pair(units1, region.b1) or _splits_pair(units2, region.b2):
            region.b1 += 1
            region.b2 += 1
            region.rebuild = True
        if merged and merged[-1].b1 >= region.a1:
            previous = merged[-1]
            previous.b1, previous.b2 = region.b1, region.b2
            previous.rebuild = True
        else:
            merged.append(region)

    if not any(region.rebuild for region in merged):
        return diffs
    out: list[Diff] = []
    pos1 = 0
    for region in merged:
        if region.a1 > pos1:
            out.append((_EQUAL, units1[pos1 : region.a1]))
        if region.rebuild:
            if region.b1 > region.a1:
                out.append((_DELETE, units1[region.a1 : region.b1]))
            if region.b2 > region.a2:
                out.append((_INSERT, units2[region.a2 : region.b2]))
        else:
            out.extend(region.diffs)
        pos1 = region.b1
    if pos1 < len(units1):
        out.append((_EQUAL, units1[pos1:]))
    return out


class _Dmp(diff_match_patch):  # type: ignore[misc]
    """dmp 20241021 with four parts aligned to npm diff-match-patch 1.0.5 (the browser's).

    * ``diff_linesToChars``: JS limits of 40000/65535 distinct lines (Python uses 666666/
      1114111). The JS side replaces its own version with a ``Map``-based copy, because 1.0.5
      uses a plain object and crashes on a last line ``hasOwnProperty`` (and miscounts
      ``__proto__``).
    * ``diff_cleanupSemanticLossless``: JS character classes (ASCII ``[a-zA-Z0-9]``, ECMAScript
      ``\\s``) instead of Python's Unicode ``isalnum``/``isspace``. Without this, edits next to
      accented letters are aligned differently.
    * ``make_hunks`` (``patch_make`` method 3): an equality of exactly ``2 * Patch_Margin``
      units inside a patch stays in that patch, like JS's ``else if``. Python closes the patch
      there instead.
    * ``patch_addContext``: the context never starts or ends inside a surrogate pair (both
      sides).
    """

    def diff_linesToChars(self, text1: str, text2: str) -> tuple[str, str, list[str]]:
        line_array = [""]  # Index 0 unused so no line hashes to "\x00", as in dmp.
        line_hash: dict[str, int] = {}

        def munge(text: str, max_lines: int) -> str:
            chars: list[str] = []
            line_start = 0
            line_end = -1
            while line_end < len(text) - 1:
                line_end = text.find("\n", line_start)
                if line_end == -1:
                    line_end = len(text) - 1
                line = text[line_start : line_end + 1]
                if line in line_hash:
                    chars.append(chr(line_hash[line]))
                else:
                    if len(line_array) == max_lines:
                        line = text[line_start:]
                        line_end = len(text)
                    chars.append(chr(len(line_array)))
                    line_hash[line] = len(line_array)
                    line_array.append(line)
                line_start = line_end + 1
            return "".join(chars)

        chars1 = munge(text1, 40000)
        chars2 = munge(text2, 65535)
        return chars1, chars2, line_array

    def diff_cleanupSemanticLossless(self, diffs: list[Diff]) -> None:
        pointer = 1
        while pointer < len(diffs) - 1:
            if diffs[pointer - 1][0] == _EQUAL and diffs[pointer + 1][0] == _EQUAL:
                equality1 = diffs[pointer - 1][1]
                edit = diffs[pointer][1]
                equality2 = diffs[pointer + 1][1]
                common = self.diff_commonSuffix(equality1, edit)
                if common:
                    common_string = edit[-common:]
                    equality1 = equality1[:-common]
                    edit = common_string + edit[:-common]
                    equality2 = common_string + equality2
                best_equality1, best_edit, best_equality2 = equality1, edit, equality2
                best_score = _semantic_score(equality1, edit) + _semantic_score(edit, equality2)
                while edit and equality2 and edit[0] == equality2[0]:
                    equality1 += edit[0]
                    edit = edit[1:] + equality2[0]
                    equality2 = equality2[1:]
                    score = _semantic_score(equality1, edit) + _semantic_score(edit, equality2)
                    if score >= best_score:
                        best_score = score
                        best_equality1, best_edit, best_equality2 = equality1, edit, equality2
                if diffs[pointer - 1][1] != best_equality1:
                    if best_equality1:
                        diffs[pointer - 1] = (diffs[pointer - 1][0], best_equality1)
                    else:
                        del diffs[pointer - 1]
                        pointer -= 1
                    diffs[pointer] = (diffs[pointer][0], best_edit)
                    if best_equality2:
                        diffs[pointer + 1] = (diffs[pointer + 1][0], best_equality2)
                    else:
                        del diffs[pointer + 1]
                        pointer -= 1
            pointer += 1

    def patch_addContext(self, patch: _Hunk, text: str) -> None:
        if not text:
            return
        margin: int = self.Patch_Margin
        max_bits: int = self.Match_MaxBits
        start: int = patch.start2
        length: int = patch.length1
        pattern = text[start : start + length]
        padding = 0
        while text.find(pattern) != text.rfind(pattern) and len(pattern) < max_bits - 2 * margin:
            padding += margin
            pattern = text[max(0, start - padding) : start + length + padding]
        padding += margin
        prefix_start = max(0, start - padding)
        if _splits_pair(text, prefix_start):
            prefix_start -= 1
        suffix_end = min(len(text), start + length + padding)
        if _splits_pair(text, suffix_end):
            suffix_end += 1
        prefix = text[prefix_start:start]
        if prefix:
            patch.diffs.insert(0, (_EQUAL, prefix))
        suffix = text[start + length : suffix_end]
        if suffix:
            patch.diffs.append((_EQUAL, suffix))
        patch.start1 -= len(prefix)
        patch.start2 -= len(prefix)
        patch.length1 += len(prefix) + len(suffix)
        patch.length2 += len(prefix) + len(suffix)

    def make_hunks(self, text1: str, diffs: list[Diff]) -> list[_Hunk]:
        """``patch_make(text1, diffs)`` with JS 1.0.5's branch structure."""
        margin: int = self.Patch_Margin
        patches: list[_Hunk] = []
        if not diffs:
            return []
        patch = _Hunk(0, 0, 0, 0, [])
        count1 = count2 = 0
        prepatch = postpatch = text1
        for x, (op, text) in enumerate(diffs):
            if not patch.diffs and op != _EQUAL:
                patch.start1, patch.start2 = count1, count2
            if op == _INSERT:
                patch.diffs.append((op, text))
                patch.length2 += len(text)
                postpatch = postpatch[:count2] + text + postpatch[count2:]
            elif op == _DELETE:
                patch.length1 += len(text)
                patch.diffs.append((op, text))
                postpatch = postpatch[:count2] + postpatch[count2 + len(text) :]
            elif len(text) <= 2 * margin and patch.diffs and len(diffs) != x + 1:
                patch.diffs.append((op, text))  # Small equality inside a patch.
                patch.length1 += len(text)
                patch.length2 += len(text)
            elif len(text) >= 2 * margin and patch.diffs:
                self.patch_addContext(patch, prepatch)
                patches.append(patch)
                patch = _Hunk(0, 0, 0, 0, [])
                # Rolling context: later hunks are positioned in the text patched so far.
                prepatch = postpatch
                count1 = count2
            if op != _INSERT:
                count1 += len(text)
            if op != _DELETE:
                count2 += len(text)
        if patch.diffs:
            self.patch_addContext(patch, prepatch)
            patches.append(patch)
        return patches


def _semantic_score(one: str, two: str) -> int:
    """JS 1.0.5 ``diff_cleanupSemanticScore_``: 6 (edge) .. 0 (inside a word)."""
    if not one or not two:
        return 6
    char1, char2 = one[-1], two[0]
    non_alnum1 = char1 not in _JS_ALNUM
    non_alnum2 = char2 not in _JS_ALNUM
    space1 = non_alnum1 and char1 in _JS_SPACE
    space2 = non_alnum2 and char2 in _JS_SPACE
    break1 = space1 and char1 in "\r\n"
    break2 = space2 and char2 in "\r\n"
    blank1 = break1 and _BLANKLINE_END.search(one) is not None
    blank2 = break2 and _BLANKLINE_START.match(two) is not None
    if blank1 or blank2:
        return 5
    if break1 or break2:
        return 4
    if non_alnum1 and not space1 and space2:
        return 3
    if space1 or space2:
        return 2
    if non_alnum1 or non_alnum2:
        return 1
    return 0


# --- Patch text ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Hunk:
    """One ``@@`` block; starts are 0-based, all numbers and texts in UTF-16 code units."""

    start1: int
    start2: int
    length1: int
    length2: int
    diffs: list[Diff]


def _coords(start: int, length: int) -> str:
    if length == 0:
        return f"{start},0"
    if length == 1:
        return str(start + 1)
    return f"{start + 1},{length}"


def _serialize(hunks: list[_Hunk]) -> str:
    """dmp ``patch_toText`` over unit strings, byte-identical to JS 1.0.5's."""
    out: list[str] = []
    signs = {_INSERT: "+", _DELETE: "-", _EQUAL: " "}
    for hunk in hunks:
        out.append(
            f"@@ -{_coords(hunk.start1, hunk.length1)} +{_coords(hunk.start2, hunk.length2)} @@\n"
        )
        for op, units in hunk.diffs:
            data = _from_units(units).encode("utf-8")
            out.append(signs[op] + urllib.parse.quote(data, safe=_URI_SAFE) + "\n")
    return "".join(out)


def _parse(text: str) -> list[_Hunk]:
    """dmp ``patch_fromText``, accepting only text that :func:`_serialize` reproduces."""
    try:
        patches = diff_match_patch().patch_fromText(text)
        hunks = [
            _Hunk(
                p.start1,
                p.start2,
                p.length1,
                p.length2,
                [(op, _to_units(data)) for op, data in p.diffs],
            )
            for p in patches
        ]
        canonical = _serialize(hunks)
    except ValueError as exc:  # includes UnicodeError and int() limits
        raise PatchError(f"malformed patch: {exc}") from exc
    if canonical != text:
        raise PatchError("malformed patch: not in canonical diff-match-patch form")
    return hunks


def _apply_hunks(units: str, hunks: list[_Hunk]) -> str:
    for number, hunk in enumerate(hunks, start=1):
        old = "".join(data for op, data in hunk.diffs if op != _INSERT)
        new = "".join(data for op, data in hunk.diffs if op != _DELETE)
        if len(old) != hunk.length1 or len(new) != hunk.length2:
            raise PatchError(f"malformed patch: hunk {number} lengths do not match its body")
        start = hunk.start2
        if (
            hunk.start1 < 0
            or not 0 <= start <= len(units)
            or units[start : start + len(old)] != old
        ):
            raise PatchError(f"hunk {number} does not match the base text")
        units = units[:start] + new + units[start + len(old) :]
    return units
