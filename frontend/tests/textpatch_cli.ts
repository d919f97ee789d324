// Command-line access to src/textpatch.ts for the cross-language checks (bundled with esbuild, run with node).
//
//   node textpatch-cli.mjs vectors   rewrite js_patch in ../tests/fixtures/patch_vectors.json (`npm run vectors`)
//   node textpatch-cli.mjs stdio     read {"cases":[{base, edited, patch}]} on stdin, write {"results":[...]}
//
// The stdio mode is what tests/chatapp/prompts/test_textpatch.py drives: for each case it makes
// the JS patch, applies the given (Python-made) patch, and hashes `edited` both ways.

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

import { applyPatch, makePatch, sha256Hex } from "../src/textpatch.ts";

interface FixtureCase {
  name: string;
  base: string;
  edited: string;
}

interface Vector {
  name: string;
  sha256_base: string | null;
  sha256_edited: string | null;
  js_patch: string;
  py_patch: string | null;
}

/** The repository root: the nearest directory above `start` holding the shared fixture. */
function repoRoot(start: string = process.cwd()): string {
  for (let dir = resolve(start); ; dir = dirname(dir)) {
    if (existsSync(join(dir, "tests", "fixtures", "patch_cases.json"))) return dir;
    if (dirname(dir) === dir) throw new Error(`tests/fixtures/patch_cases.json not found above ${start}`);
  }
}

function readCases(root: string): FixtureCase[] {
  const data = JSON.parse(readFileSync(join(root, "tests", "fixtures", "patch_cases.json"), "utf8")) as { cases: FixtureCase[] };
  return data.cases;
}

function readVectors(root: string): Vector[] {
  const path = join(root, "tests", "fixtures", "patch_vectors.json");
  if (!existsSync(path)) return [];
  return (JSON.parse(readFileSync(path, "utf8")) as { cases: Vector[] }).cases;
}

function writeVectors(root: string): void {
  const previous = new Map(readVectors(root).map((v) => [v.name, v]));
  const cases: Vector[] = readCases(root).map((c) => {
    const old = previous.get(c.name);
    // Hashes and py_patch belong to the Python writer; keep them.
    return {
      name: c.name,
      sha256_base: old?.sha256_base ?? null,
      sha256_edited: old?.sha256_edited ?? null,
      js_patch: makePatch(c.base, c.edited),
      py_patch: old?.py_patch ?? null,
    };
  });
  // Same bytes as Python's json.dumps(..., indent=2, ensure_ascii=False) + "\n".
  writeFileSync(join(root, "tests", "fixtures", "patch_vectors.json"), JSON.stringify({ cases }, null, 2) + "\n");
  console.log(`wrote js_patch for ${cases.length} cases`);
}

interface StdioCase {
  base: string;
  edited: string;
  patch: string | null;
}

function errorText(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

async function stdio(): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const input = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { cases: StdioCase[] };
  const results = [];
  for (const c of input.cases) {
    let patch: string | null = null;
    let makeError: string | null = null;
    let applied: string | null = null;
    let applyError: string | null = null;
    try {
      patch = makePatch(c.base, c.edited);
    } catch (err) {
      makeError = errorText(err);
    }
    if (c.patch !== null) {
      try {
        applied = applyPatch(c.base, c.patch);
      } catch (err) {
        applyError = errorText(err);
      }
    }
    results.push({
      patch,
      make_error: makeError,
      applied,
      apply_error: applyError,
      sha256_subtle: await sha256Hex(c.edited),
      sha256_fallback: await sha256Hex(c.edited, null),
    });
  }
  process.stdout.write(JSON.stringify({ results }));
}

const mode = process.argv[2];
if (mode === "vectors") {
  writeVectors(repoRoot());
} else if (mode === "stdio") {
  await stdio();
} else {
  console.error("usage: textpatch-cli.mjs vectors|stdio");
  process.exit(2);
}
