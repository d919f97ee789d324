import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { test } from "vitest";

import DiffMatchPatch from "diff-match-patch";

import { MAX_PATCH_CHARS, PatchError, applyPatch, makePatch, sha256Hex, sha256HexSync } from "../src/textpatch.ts";

// Shared with tests/chatapp/prompts/test_textpatch.py. The vectors hold the JS-made and the
// Python-made patch per case (regenerate: see that file's docstring).
interface FixtureCase {
  name: string;
  base: string;
  edited: string;
}

interface Vector {
  name: string;
  sha256_base: string | null;
  sha256_edited: string | null;
  js_patch: string | null;
  py_patch: string | null;
}

function repoRoot(): string {
  for (let dir = resolve(process.cwd()); ; dir = dirname(dir)) {
    if (existsSync(join(dir, "tests", "fixtures", "patch_cases.json"))) return dir;
    if (dirname(dir) === dir) throw new Error("tests/fixtures/patch_cases.json not found");
  }
}

const fixtures = join(repoRoot(), "tests", "fixtures");
const cases = (JSON.parse(readFileSync(join(fixtures, "patch_cases.json"), "utf8")) as { cases: FixtureCase[] }).cases;
const vectors = (JSON.parse(readFileSync(join(fixtures, "patch_vectors.json"), "utf8")) as { cases: Vector[] }).cases;
const REGENERATE = "regenerate: (cd frontend && npm run vectors) && .venv/bin/python -m tests.chatapp.prompts.test_textpatch";

test("vectors cover exactly the fixture cases", () => {
  assert.ok(cases.length >= 25);
  assert.deepEqual(
    vectors.map((v) => v.name),
    cases.map((c) => c.name),
    `patch_vectors.json is stale; ${REGENERATE}`,
  );
});

for (const [index, c] of cases.entries()) {
  test(`fixture ${c.name}`, async () => {
    const vector = vectors[index];
    assert.ok(vector !== undefined && vector.name === c.name, REGENERATE);
    const patch = makePatch(c.base, c.edited);
    assert.equal(patch, vector.js_patch, `JS output drifted; ${REGENERATE}`);
    assert.equal(applyPatch(c.base, patch), c.edited);
    // Cross-language: the Python-made patch applies here and is byte-identical.
    assert.ok(vector.py_patch !== null, REGENERATE);
    assert.equal(applyPatch(c.base, vector.py_patch), c.edited);
    assert.equal(patch, vector.py_patch);
    // Hashes were written by Python's hashlib.
    assert.equal(await sha256Hex(c.edited), vector.sha256_edited);
    assert.equal(await sha256Hex(c.edited, null), vector.sha256_edited);
    assert.equal(await sha256Hex(c.base), vector.sha256_base);
    assert.equal(sha256HexSync(c.base), vector.sha256_base);
  });
}

test("stock dmp 1.0.5 splits surrogate pairs; makePatch does not", () => {
  const dmp = new DiffMatchPatch();
  assert.throws(() => dmp.patch_toText(dmp.patch_make("I feel 😀 today", "I feel 😁 today")), URIError);
  assert.throws(() => dmp.patch_toText(dmp.patch_make("😀😀 abc", "😀😀 abd")), URIError);
  assert.equal(makePatch("I feel 😀 today", "I feel 😁 today"), "@@ -4,10 +4,10 @@\n eel \n-%F0%9F%98%80\n+%F0%9F%98%81\n  tod\n");
  assert.equal(makePatch("😀😀 abc", "😀😀 abd"), "@@ -3,6 +3,6 @@\n %F0%9F%98%80 ab\n-c\n+d\n");
});

test("stock dmp 1.0.5 crashes on a last line named hasOwnProperty; makePatch does not", () => {
  const base = "x".repeat(60) + "\n" + "line a\n".repeat(20) + "hasOwnProperty";
  const edited = "y".repeat(60) + "\n" + "line b\n".repeat(20) + "hasOwnProperty!";
  assert.throws(() => new DiffMatchPatch().patch_make(base, edited), TypeError);
  assert.equal(applyPatch(base, makePatch(base, edited)), edited);
});

// Mulberry32: a tiny seeded PRNG so failures reproduce.
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PIECES = ["a", "b", " ", "\n", "\r\n", "\t", "%", "+", "#", "é", "中", "ש", "😀", "😁", "😂", "🙂", "🇨🇦", "🇺🇸", "👍🏽", "👩‍👩‍👧", "𝐀", "\u200d", "\ufe0f"];

test("random edits round-trip and never break a surrogate pair", () => {
  const random = prng(7);
  const pick = (): string => PIECES[Math.floor(random() * PIECES.length)]!;
  for (let n = 0; n < 1500; n++) {
    const size = n % 10 === 0 ? 200 + Math.floor(random() * 300) : Math.floor(random() * 40);
    const tokens = Array.from({ length: size }, pick);
    const edited = [...tokens];
    for (let k = Math.floor(random() * 6); k > 0; k--) {
      const at = Math.floor(random() * (edited.length + 1));
      const count = 1 + Math.floor(random() * 4);
      if (random() < 0.4) edited.splice(at, 0, ...Array.from({ length: count }, pick));
      else if (random() < 0.6) edited.splice(at, count);
      else edited.splice(at, count, ...Array.from({ length: count }, pick));
    }
    const base = tokens.join("");
    const target = edited.join("");
    const patch = makePatch(base, target);
    assert.match(patch, /^[\x20-\x7e\n]*$/, `non-ASCII patch for ${JSON.stringify([base, target])}`);
    assert.equal(applyPatch(base, patch), target, JSON.stringify([base, target]));
  }
});

const BASE = "You are a helpful assistant. 😀 Answer briefly.\nUse {{ language }}.";
const EDITED = "You are a very helpful assistant. 😁 Answer briefly!\nUse {{ language }} only.";

test("a patch for another base throws PatchError instead of fuzzy-applying", () => {
  const patch = makePatch(BASE, EDITED);
  for (const other of ["X" + BASE, BASE.replace("helpful", "helpfull"), BASE.replace("😀", "😂"), EDITED, "", "Something else.", BASE.slice(0, 20)]) {
    assert.throws(() => applyPatch(other, patch), PatchError, JSON.stringify(other));
  }
  // What stock dmp does instead: relocates the hunks and reports success.
  const dmp = new DiffMatchPatch();
  const [text, ok] = dmp.patch_apply(dmp.patch_make(BASE, EDITED), "X" + BASE);
  assert.deepEqual([text, ok.every(Boolean)], ["X" + EDITED, true]);
});

test("malformed or non-canonical patch text throws PatchError", () => {
  const bad = [
    "garbage",
    "@@ -1,3 +1,3 @@\n*abc\n",
    "@@ -1,3 +1,3 @@\n abc",
    "@@ -1,3 +1,3 @@\n abc\n\n",
    "@@ -1,1 +1,1 @@\n-Y\n+Z\n",
    "@@ -01,2 +01,2 @@\n-Yo\n+Zo\n",
    "@@ -1,2 +1,2 @@\n-Y%6f\n+Zo\n",
    "@@ -1,3 +1,3 @@\n-Y%23\n+Zo\n",
    "@@ -1,2 +1,3 @@\n-Y%c3%a9\n+Zo\n",
    "@@ -1,2 +1,2 @@\n-Yé\n+Zo\n",
    "@@ -1,2 +1,2 @@\n-Y%E9\n+Zo\n",
    "@@ -1,2 +1,2 @@\n-Y%ED%A0%BD\n+Zo\n",
    "@@ -1,2 +1,2 @@\n-Y%zz\n+Zo\n",
    "@@ -1,2 +1,2 @@\r\n-Yo\r\n+Zo\r\n",
    "@@ -1,5 +1,5 @@\n-Yo\n+Zo\n",
    "@@ -0,2 +0,2 @@\n-Yo\n+Zo\n",
    "@@ -99,0 +99 @@\n+Z\n",
    "@@ -\u0661,2 +\u0661,2 @@\n-Yo\n+Zo\n",
    "@@ -1," + "9".repeat(5000) + " +1,2 @@\n-Yo\n+Zo\n",
  ];
  for (const patch of bad) assert.throws(() => applyPatch("Yo there", patch), PatchError, JSON.stringify(patch.slice(0, 60)));
  assert.equal(applyPatch("Yo there", "@@ -1,2 +1,2 @@\n-Yo\n+Zo\n"), "Zo there");
});

test("a patch splitting a surrogate pair, lone surrogates and oversized patches throw", () => {
  assert.throws(() => applyPatch("😀", "@@ -1,0 +2 @@\n+x\n"), PatchError);
  assert.throws(() => makePatch("a\ud83d", "b"), PatchError);
  assert.throws(() => makePatch("a", "\ude00b"), PatchError);
  assert.throws(() => applyPatch("x\ud83d", "@@ -1 +1 @@\n-x\n+y\n"), PatchError);
  const patch = makePatch("", "x".repeat(MAX_PATCH_CHARS));
  assert.ok(patch.length > MAX_PATCH_CHARS); // makePatch still returns it; the caller sends the text instead
  assert.throws(() => applyPatch("", patch), PatchError);
  assert.equal(applyPatch("same 😀", ""), "same 😀");
  assert.equal(makePatch("same 😀", "same 😀"), "");
});

test("sha256 fallback matches node:crypto across padding boundaries", async () => {
  const random = prng(3);
  for (let length = 0; length < 200; length++) {
    const mixed = Array.from({ length: length >> 2 }, () => PIECES[Math.floor(random() * PIECES.length)]!).join("");
    for (const text of ["a".repeat(length), mixed]) {
      const expected = createHash("sha256").update(text, "utf8").digest("hex");
      assert.equal(sha256HexSync(text), expected, `length ${length}`);
      assert.equal(await sha256Hex(text), expected);
      assert.equal(await sha256Hex(text, null), expected);
    }
  }
  const big = "😀 prompt\n".repeat(50_000);
  assert.equal(sha256HexSync(big), createHash("sha256").update(big, "utf8").digest("hex"));
});
