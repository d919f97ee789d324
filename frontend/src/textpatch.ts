// Edits of a prompt text as diff-match-patch patches, byte-compatible with the server's
// chatapp/prompts/textpatch.py (which documents the wire format in full).
//
// In short, a patch is dmp's patch_toText over UTF-16 code units (JS string indices). Hunk
// boundaries, diffs and context never split a surrogate pair: stock dmp 1.0.5 does split them
// (😀 -> 😁 shares the high surrogate), and then encodeURI throws URIError. keepSurrogatePairs
// and the patched addContext below fix that the same way the Python side does. applyPatch is
// strict. Every hunk must match exactly at its position, and only canonical patch text (what
// makePatch writes) is accepted, so a hunk that does not match throws instead of fuzzy-applying.
// A base that differs outside the hunks can still apply: compare sha256Hex of the result.

import DiffMatchPatch from "diff-match-patch";

import { MAX_PATCH_CHARS } from "./patchlimit.ts";

export { MAX_PATCH_CHARS };

export class PatchError extends Error {
  override name = "PatchError";
}

const DELETE = -1;
const EQUAL = 0;
const INSERT = 1;

type Diff = [number, string];

/** dmp's patch_obj; numbers and texts are UTF-16 code units, starts 0-based. */
interface Hunk {
  diffs: Diff[];
  start1: number;
  start2: number;
  length1: number;
  length2: number;
}

/** The dmp methods used here, typed as 1.0.5 actually behaves (the @types are loose). */
interface Dmp {
  diff_main(text1: string, text2: string, checklines: boolean): Diff[];
  diff_cleanupSemantic(diffs: Diff[]): void;
  diff_cleanupEfficiency(diffs: Diff[]): void;
  patch_make(text1: string, diffs: Diff[]): Hunk[];
  patch_toText(patches: Hunk[]): string;
  patch_fromText(text: string): Hunk[];
  diff_linesToChars_(text1: string, text2: string): { chars1: string; chars2: string; lineArray: string[] };
  patch_addContext_(patch: Hunk, text: string): void;
  Patch_Margin: number;
  Match_MaxBits: number;
}

export function makePatch(base: string, edited: string): string {
  requireWellFormed(base, "base");
  requireWellFormed(edited, "edited");
  if (base === edited) return "";
  const dmp = newDmp();
  const diffs = dmp.diff_main(base, edited, true);
  if (diffs.length > 2) {
    dmp.diff_cleanupSemantic(diffs);
    dmp.diff_cleanupEfficiency(diffs);
  }
  const hunks = dmp.patch_make(base, keepSurrogatePairs(base, edited, diffs));
  let text: string;
  let ok: boolean;
  // Cheap insurance: never hand out a patch that would not reproduce `edited` exactly.
  try {
    text = dmp.patch_toText(hunks);
    ok = applyHunks(base, parse(text)) === edited;
  } catch (err) {
    throw new PatchError(`internal error: the computed patch is invalid (${String(err)})`);
  }
  if (!ok) throw new PatchError("internal error: the computed patch does not reproduce the edit");
  return text;
}

/** Applies a patch from makePatch or the server; throws PatchError unless every hunk matches. */
export function applyPatch(base: string, patch: string): string {
  if (patch.length > MAX_PATCH_CHARS) throw new PatchError(`patch is longer than ${MAX_PATCH_CHARS} characters`);
  requireWellFormed(base, "base");
  if (patch === "") return base;
  const out = applyHunks(base, parse(patch));
  if (!isWellFormed(out)) throw new PatchError("patch splits a surrogate pair of the base text");
  return out;
}

/** SHA-256 of the UTF-8 bytes, lowercase hex. Without crypto.subtle (plain http on a LAN
 * address is not a secure context) it falls back to a small pure implementation. */
export async function sha256Hex(
  text: string,
  subtle: SubtleCrypto | null | undefined = globalThis.crypto?.subtle,
): Promise<string> {
  if (subtle && typeof subtle.digest === "function") {
    try {
      const digest = await subtle.digest("SHA-256", new TextEncoder().encode(text));
      return toHex(new Uint8Array(digest));
    } catch {
      // fall through to the pure implementation
    }
  }
  return sha256HexSync(text);
}

// --- dmp set-up -------------------------------------------------------------------------

function newDmp(): Dmp {
  const dmp = new DiffMatchPatch() as unknown as Dmp;
  dmp.diff_linesToChars_ = linesToChars;
  dmp.patch_addContext_ = (patch, text) => addContext(dmp, patch, text);
  return dmp;
}

// 1.0.5's version keys a plain object by line text: a last line "hasOwnProperty" makes it throw
// and "__proto__" never matches. Same algorithm and limits (40000/65535) with a Map; the Python
// side uses the same limits.
function linesToChars(text1: string, text2: string): { chars1: string; chars2: string; lineArray: string[] } {
  const lineArray = [""]; // index 0 unused so no line hashes to "\0", as in dmp
  const lineHash = new Map<string, number>();
  const munge = (text: string, maxLines: number): string => {
    let chars = "";
    let lineStart = 0;
    let lineEnd = -1;
    while (lineEnd < text.length - 1) {
      lineEnd = text.indexOf("\n", lineStart);
      if (lineEnd === -1) lineEnd = text.length - 1;
      let line = text.substring(lineStart, lineEnd + 1);
      const known = lineHash.get(line);
      if (known !== undefined) {
        chars += String.fromCharCode(known);
      } else {
        if (lineArray.length === maxLines) {
          line = text.substring(lineStart);
          lineEnd = text.length;
        }
        chars += String.fromCharCode(lineArray.length);
        lineHash.set(line, lineArray.length);
        lineArray.push(line);
      }
      lineStart = lineEnd + 1;
    }
    return chars;
  };
  const chars1 = munge(text1, 40000);
  const chars2 = munge(text2, 65535);
  return { chars1, chars2, lineArray };
}

// dmp's patch_addContext_, except that the context never starts or ends inside a surrogate pair.
function addContext(dmp: Dmp, patch: Hunk, text: string): void {
  if (text.length === 0) return;
  const margin = dmp.Patch_Margin;
  const start = patch.start2;
  const length = patch.length1;
  let pattern = text.substring(start, start + length);
  let padding = 0;
  while (text.indexOf(pattern) !== text.lastIndexOf(pattern) && pattern.length < dmp.Match_MaxBits - 2 * margin) {
    padding += margin;
    pattern = text.substring(Math.max(0, start - padding), start + length + padding);
  }
  padding += margin;
  let prefixStart = Math.max(0, start - padding);
  if (splitsPair(text, prefixStart)) prefixStart -= 1;
  let suffixEnd = Math.min(text.length, start + length + padding);
  if (splitsPair(text, suffixEnd)) suffixEnd += 1;
  const prefix = text.substring(prefixStart, start);
  if (prefix) patch.diffs.unshift([EQUAL, prefix]);
  const suffix = text.substring(start + length, suffixEnd);
  if (suffix) patch.diffs.push([EQUAL, suffix]);
  patch.start1 -= prefix.length;
  patch.start2 -= prefix.length;
  patch.length1 += prefix.length + suffix.length;
  patch.length2 += prefix.length + suffix.length;
}

// --- Keeping surrogate pairs whole (mirrors _keep_surrogate_pairs in textpatch.py) -----------

const isHigh = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;
const isLow = (code: number): boolean => code >= 0xdc00 && code <= 0xdfff;

function splitsPair(text: string, pos: number): boolean {
  return pos > 0 && pos < text.length && isHigh(text.charCodeAt(pos - 1)) && isLow(text.charCodeAt(pos));
}

interface Region {
  a1: number;
  a2: number;
  b1: number;
  b2: number;
  diffs: Diff[];
  rebuild: boolean;
}

/** Moves edit-region edges off the middle of surrogate pairs (see the Python docstring).
 * Regions it touches become one delete plus one insert; untouched ones keep dmp's diffs. */
function keepSurrogatePairs(text1: string, text2: string, diffs: Diff[]): Diff[] {
  const regions: Region[] = [];
  let i1 = 0;
  let i2 = 0;
  let current: Region | null = null;
  for (const [op, text] of diffs) {
    if (op === EQUAL) {
      current = null;
      i1 += text.length;
      i2 += text.length;
      continue;
    }
    if (current === null) {
      current = { a1: i1, a2: i2, b1: i1, b2: i2, diffs: [], rebuild: false };
      regions.push(current);
    }
    current.diffs.push([op, text]);
    if (op === DELETE) i1 += text.length;
    else i2 += text.length;
    current.b1 = i1;
    current.b2 = i2;
  }

  const merged: Region[] = [];
  for (const region of regions) {
    region.rebuild = region.diffs.some(
      ([, text]) => text.length > 0 && (isLow(text.charCodeAt(0)) || isHigh(text.charCodeAt(text.length - 1))),
    );
    if (splitsPair(text1, region.a1) || splitsPair(text2, region.a2)) {
      region.a1 -= 1;
      region.a2 -= 1;
      region.rebuild = true;
    }
    if (splitsPair(text1, region.b1) || splitsPair(text2, region.b2)) {
      region.b1 += 1;
      region.b2 += 1;
      region.rebuild = true;
    }
    const previous = merged[merged.length - 1];
    if (previous !== undefined && previous.b1 >= region.a1) {
      previous.b1 = region.b1;
      previous.b2 = region.b2;
      previous.rebuild = true;
    } else {
      merged.push(region);
    }
  }

  if (!merged.some((region) => region.rebuild)) return diffs;
  const out: Diff[] = [];
  let pos1 = 0;
  for (const region of merged) {
    if (region.a1 > pos1) out.push([EQUAL, text1.substring(pos1, region.a1)]);
    if (region.rebuild) {
      if (region.b1 > region.a1) out.push([DELETE, text1.substring(region.a1, region.b1)]);
      if (region.b2 > region.a2) out.push([INSERT, text2.substring(region.a2, region.b2)]);
    } else {
      out.push(...region.diffs);
    }
    pos1 = region.b1;
  }
  if (pos1 < text1.length) out.push([EQUAL, text1.substring(pos1)]);
  return out;
}

// --- Parsing and strict application --------------------------------------------------------

function parse(text: string): Hunk[] {
  const dmp = newDmp();
  let hunks: Hunk[];
  let canonical: string;
  try {
    hunks = dmp.patch_fromText(text);
    canonical = dmp.patch_toText(hunks);
  } catch (err) {
    throw new PatchError(`malformed patch: ${err instanceof Error ? err.message : String(err)}`);
  }
  // decodeURI keeps escapes of reserved characters (%23 stays "%23") where Python's unquote
  // decodes them: only the one canonical spelling means the same thing on both sides.
  if (canonical !== text) throw new PatchError("malformed patch: not in canonical diff-match-patch form");
  return hunks;
}

function applyHunks(text: string, hunks: Hunk[]): string {
  hunks.forEach((hunk, index) => {
    let oldText = "";
    let newText = "";
    for (const [op, data] of hunk.diffs) {
      if (op !== INSERT) oldText += data;
      if (op !== DELETE) newText += data;
    }
    if (oldText.length !== hunk.length1 || newText.length !== hunk.length2) {
      throw new PatchError(`malformed patch: hunk ${index + 1} lengths do not match its body`);
    }
    const start = hunk.start2;
    if (hunk.start1 < 0 || start < 0 || start > text.length || text.substring(start, start + oldText.length) !== oldText) {
      throw new PatchError(`hunk ${index + 1} does not match the base text`);
    }
    text = text.substring(0, start) + newText + text.substring(start + oldText.length);
  });
  return text;
}

function isWellFormed(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (isHigh(code)) {
      if (!isLow(text.charCodeAt(i + 1))) return false;
      i++;
    } else if (isLow(code)) {
      return false;
    }
  }
  return true;
}

function requireWellFormed(text: string, name: string): void {
  if (!isWellFormed(text)) throw new PatchError(`${name} contains an unpaired surrogate`);
}

// --- SHA-256 fallback (FIPS 180-4) ------------------------------------------------------------

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);

const rotr = (x: number, n: number): number => (x >>> n) | (x << (32 - n));

/** Pure SHA-256 of the UTF-8 bytes, lowercase hex (the path sha256Hex takes without crypto.subtle). */
export function sha256HexSync(text: string): string {
  const data = new TextEncoder().encode(text);
  const blocks = Math.ceil((data.length + 9) / 64);
  const bytes = new Uint8Array(blocks * 64);
  bytes.set(data);
  bytes[data.length] = 0x80;
  const view = new DataView(bytes.buffer);
  view.setUint32(bytes.length - 8, Math.floor(data.length / 0x20000000)); // bit length, high word
  view.setUint32(bytes.length - 4, (data.length << 3) >>> 0);
  const h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const w = new Uint32Array(64);
  for (let offset = 0; offset < bytes.length; offset += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(offset + i * 4);
    for (let i = 16; i < 64; i++) {
      const x = w[i - 15]!;
      const y = w[i - 2]!;
      const s0 = rotr(x, 7) ^ rotr(x, 18) ^ (x >>> 3);
      const s1 = rotr(y, 17) ^ rotr(y, 19) ^ (y >>> 10);
      w[i] = w[i - 16]! + s0 + w[i - 7]! + s1;
    }
    let a = h[0]!;
    let b = h[1]!;
    let c = h[2]!;
    let d = h[3]!;
    let e = h[4]!;
    let f = h[5]!;
    let g = h[6]!;
    let hh = h[7]!;
    for (let i = 0; i < 64; i++) {
      const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i]! + w[i]!) | 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h[0] = h[0]! + a;
    h[1] = h[1]! + b;
    h[2] = h[2]! + c;
    h[3] = h[3]! + d;
    h[4] = h[4]! + e;
    h[5] = h[5]! + f;
    h[6] = h[6]! + g;
    h[7] = h[7]! + hh;
  }
  return toHex(bigEndian(h));
}

function bigEndian(words: Uint32Array): Uint8Array {
  const out = new Uint8Array(words.length * 4);
  const view = new DataView(out.buffer);
  words.forEach((word, i) => view.setUint32(i * 4, word));
  return out;
}

function toHex(bytes: Uint8Array): string {
  let out = "";
  for (const byte of bytes) out += byte.toString(16).padStart(2, "0");
  return out;
}
