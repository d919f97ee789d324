// Prompt templates (docs/protocol.md, "Templated messages"): the cached template list, the
// body rendering rule shared with the server (chatapp/prompts/rendering.py), variable
// validation, and the construction of a templated `chat.send`. No DOM: fetch and storage are
// injected, so all of it runs under node:test.

import { templatedSendFrame, type SendFrame, type TemplateRef, type VariableValues } from "./protocol.ts";
import { MAX_PATCH_CHARS } from "./patchlimit.ts";

export { MAX_PATCH_CHARS };

export type VariableType = "string" | "integer" | "choice";

export interface TemplateVariable {
  name: string;
  label: string;
  type: VariableType;
  required: boolean;
  /** Maximum length in characters (Unicode code points, like Python's len); null: none. */
  max_length: number | null;
  /** The allowed values of a `choice` variable (empty for the other types). */
  choices: string[];
}

export interface PromptTemplate extends TemplateRef {
  name: string;
  description: string;
  body: string;
  variables: TemplateVariable[];
}

// ---------------------------------------------------------------------------------------
// Rendering

/** `{{name}}`, no spaces inside the braces; the same pattern as the server's. */
const PLACEHOLDER = /\{\{([a-z_][a-z0-9_]*)\}\}/g;

function valueString(v: string | number): string {
  if (typeof v === "string") return v;
  // Integers in plain decimal (never "1e+21"), like Python's str(int).
  return Number.isInteger(v) ? BigInt(v).toString() : String(v);
}

/**
 * The server's rendering rule (chatapp/prompts/rendering.py), exactly: one left-to-right
 * pass over `body`; every `{{name}}` whose name is a key of `variables` becomes the value's
 * string form (integers in decimal). Anything else stays verbatim: unknown names,
 * `{{ name }}` with spaces, upper-case names, and placeholders inside substituted values
 * (no recursion). The server substitutes every *declared* variable (a missing one as ""),
 * so pass the output of validateVariables, which holds every declared name.
 */
export function renderBody(body: string, variables: Readonly<Record<string, string | number>>): string {
  return body.replace(PLACEHOLDER, (whole: string, name: string) => {
    if (!Object.prototype.hasOwnProperty.call(variables, name)) return whole;
    const v = variables[name];
    return v === undefined ? whole : valueString(v);
  });
}

// ---------------------------------------------------------------------------------------
// Validation

export type FieldErrorCode = "required" | "max_length" | "integer" | "choice";

export interface FieldError {
  name: string;
  label: string;
  code: FieldErrorCode;
  message: string;
}

export interface ValidationResult {
  /** What to send (and render): strings, integers for `integer` variables. */
  variables: VariableValues;
  errors: FieldError[];
}

const INTEGER = /^[+-]?[0-9]+$/;

function codePoints(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

function parseInteger(raw: string): number | null {
  const t = raw.trim();
  if (!INTEGER.test(t)) return null;
  const n = Number(t);
  return Number.isSafeInteger(n) ? n : null;
}

/**
 * Check the raw input values (as typed: strings) against the template's variables, and
 * convert them to what is sent. Every declared variable is in the result (undeclared
 * names are dropped: the server refuses them); an optional variable left empty is sent as
 * "" whatever its type, which the server accepts and renders as "".
 */
export function validateVariables(template: Pick<PromptTemplate, "variables">, values: Readonly<Record<string, string>>): ValidationResult {
  const entries: [string, string | number][] = [];
  const errors: FieldError[] = [];
  const fail = (v: TemplateVariable, code: FieldErrorCode, message: string) => {
    errors.push({ name: v.name, label: v.label, code, message: `${v.label}: ${message}` });
  };
  for (const v of template.variables) {
    const raw = Object.prototype.hasOwnProperty.call(values, v.name) ? (values[v.name] ?? "") : "";
    const empty = raw.trim() === "";
    if (empty && v.required) {
      fail(v, "required", "this field is required.");
      continue;
    }
    if (v.type !== "string" && empty) {
      entries.push([v.name, ""]);
      continue;
    }
    switch (v.type) {
      case "integer": {
        const n = parseInteger(raw);
        if (n === null) fail(v, "integer", "enter a whole number.");
        else entries.push([v.name, n]);
        break;
      }
      case "choice": {
        if (!v.choices.includes(raw)) fail(v, "choice", "choose one of the options.");
        else entries.push([v.name, raw]);
        break;
      }
      default: {
        if (v.max_length !== null && codePoints(raw) > v.max_length) {
          fail(v, "max_length", `at most ${v.max_length} characters.`);
        } else {
          entries.push([v.name, raw]);
        }
      }
    }
  }
  // fromEntries defines own properties, so even a variable named "__proto__" is kept as data.
  return { variables: Object.fromEntries(entries), errors };
}

/**
 * The values to preview while the user is still typing: the valid ones only, so an
 * unfilled or half-typed variable keeps showing its `{{name}}` placeholder.
 */
export function previewVariables(template: Pick<PromptTemplate, "variables">, values: Readonly<Record<string, string>>): VariableValues {
  const { variables, errors } = validateVariables(template, values);
  const out: [string, string | number][] = [];
  const bad = new Set(errors.map((e) => e.name));
  for (const [k, v] of Object.entries(variables)) {
    if (!bad.has(k) && v !== "") out.push([k, v]);
  }
  return Object.fromEntries(out);
}

// ---------------------------------------------------------------------------------------
// The templated chat.send

export interface PatchTools {
  makePatch(base: string, edited: string): string | Promise<string>;
  sha256Hex(text: string): Promise<string>;
}

// Installed by the page (`usePatchTools`): the chat page passes textpatch.ts itself; the
// widget's panel a loader that fetches it (diff-match-patch) on the first templated send.
let patchTools: PatchTools | null = null;

export function usePatchTools(tools: PatchTools): void {
  patchTools = tools;
}

/**
 * The `chat.send` for the first message of a conversation started from `template`:
 * - `edited` is exactly the rendered body: template + variables only (no text, no patch);
 * - otherwise: `patch` (base -> edited) + `result_sha256` of `edited`;
 * - if the patch cannot be made (makePatch refuses lone surrogates) or is longer than the
 *   server takes (MAX_PATCH_CHARS, `too_large`), the full `text` instead (still with
 *   template + variables).
 * `variables` must come from validateVariables (no errors).
 */
export async function buildTemplatedSend(
  id: string,
  template: PromptTemplate,
  variables: VariableValues,
  edited: string,
  given: PatchTools | null = null,
): Promise<SendFrame> {
  const tools = given ?? patchTools;
  if (tools === null) throw new Error("chat: no patch tools installed (usePatchTools)");
  const base = renderBody(template.body, variables);
  if (edited === base) {
    const resultSha256 = await tools.sha256Hex(edited);
    return templatedSendFrame(id, template, variables, { kind: "exact", resultSha256 });
  }
  try {
    const patch = await tools.makePatch(base, edited);
    // A patch carries context and a 64-char hash: for short texts and rewrites the text
    // itself is smaller (measured in bench/README.md), so send whichever is shorter.
    if (patch.length <= MAX_PATCH_CHARS && patch.length + 64 < edited.length) {
      const resultSha256 = await tools.sha256Hex(edited);
      return templatedSendFrame(id, template, variables, { kind: "patch", patch, resultSha256 });
    }
  } catch (err) {
    console.warn("chat: cannot build a template patch, sending the full text", err);
  }
  return templatedSendFrame(id, template, variables, { kind: "text", text: edited });
}

// ---------------------------------------------------------------------------------------
// The draft: which template is selected, and whether the textbox still shows its render

/**
 * Tracks the selected template and `base`, the latest rendered body. The textbox is
 * (re)filled with the render only while it still holds the previous render exactly, i.e.
 * until the user edits it by hand (or if it held their own text before a template was
 * chosen: that text is never overwritten). Each method returns the new textbox text, or
 * null to leave the textbox alone.
 */
export class TemplateDraft {
  template: PromptTemplate | null = null;
  /** The latest rendered body (the render of `template` with the previewed values). */
  base = "";

  /** True while the textbox holds nothing the user typed themselves. */
  untouched(text: string): boolean {
    return text === this.base;
  }

  select(template: PromptTemplate | null, values: Readonly<Record<string, string>>, text: string): string | null {
    const auto = this.untouched(text);
    this.template = template;
    this.base = template === null ? "" : renderBody(template.body, previewVariables(template, values));
    // "No template" clears only text that was generated.
    return auto ? this.base : null;
  }

  update(values: Readonly<Record<string, string>>, text: string): string | null {
    if (this.template === null) return null;
    return this.select(this.template, values, text);
  }

  clear(): void {
    this.template = null;
    this.base = "";
  }
}

// ---------------------------------------------------------------------------------------
// Parsing the preload list

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function parseVariable(v: unknown): TemplateVariable | null {
  if (!isObj(v)) return null;
  const name = v["name"];
  if (typeof name !== "string" || name === "") return null;
  const type = v["type"];
  const label = typeof v["label"] === "string" && v["label"] !== "" ? v["label"] : name;
  const maxLength = v["max_length"];
  const choices = Array.isArray(v["choices"]) ? (v["choices"] as unknown[]).filter((c): c is string => typeof c === "string") : [];
  return {
    name,
    label,
    // An unknown type is treated as free text; the server still validates.
    type: type === "integer" || type === "choice" ? type : "string",
    required: v["required"] !== false, // the server's default
    max_length: typeof maxLength === "number" && Number.isInteger(maxLength) && maxLength >= 0 ? maxLength : null,
    choices,
  };
}

function parseTemplate(t: unknown): PromptTemplate | null {
  if (!isObj(t)) return null;
  const { id, version, sha256, name, body } = t;
  if (typeof id !== "number" || !Number.isInteger(id)) return null;
  if (typeof version !== "number" || !Number.isInteger(version)) return null;
  if (typeof sha256 !== "string" || typeof body !== "string") return null;
  const variables: TemplateVariable[] = [];
  for (const raw of Array.isArray(t["variables"]) ? (t["variables"] as unknown[]) : []) {
    const v = parseVariable(raw);
    if (v === null) return null; // a variable we cannot read: we could not render it right
    variables.push(v);
  }
  return {
    id,
    version,
    sha256,
    name: typeof name === "string" && name !== "" ? name : `Template ${id}`,
    description: typeof t["description"] === "string" ? t["description"] : "",
    body,
    variables,
  };
}

/** Validate `{"templates": [...]}` (the preload body); skips malformed templates. */
export function parseTemplateList(data: unknown): PromptTemplate[] | null {
  if (!isObj(data) || !Array.isArray(data["templates"])) return null;
  const out: PromptTemplate[] = [];
  for (const t of data["templates"] as unknown[]) {
    const parsed = parseTemplate(t);
    if (parsed !== null) out.push(parsed);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// The store: localStorage cache revalidated with ETag

export const TEMPLATES_URL = "/api/templates/";
export const TEMPLATES_STORAGE_KEY = "chat.templates.v1";

export interface StorageLike {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

export interface FetchResponseLike {
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  json(): Promise<unknown>;
}

export interface FetchInit {
  headers: Record<string, string>;
  credentials: "same-origin";
  cache: "no-store";
}

export type FetchLike = (url: string, init: FetchInit) => Promise<FetchResponseLike>;

/** `updated`: 200, list replaced; `not-modified`: 304; `error`: kept the cache. */
export type RevalidateOutcome = "updated" | "not-modified" | "error";

export interface TemplateStoreOptions {
  fetch: FetchLike;
  /** null: no persistence (localStorage blocked). */
  storage: StorageLike | null;
  url?: string;
  storageKey?: string;
}

interface Stored {
  etag: string | null;
  templates: unknown;
}

/** ETags compared by value: the header is quoted (maybe weak), the socket push may be bare. */
function sameEtag(a: string, b: string): boolean {
  const bare = (t: string) => t.trim().replace(/^W\//, "").replace(/^"(.*)"$/, "$1");
  return bare(a) === bare(b);
}

export class TemplateStore {
  private list: PromptTemplate[] = [];
  private tag: string | null = null;
  private readonly listeners = new Set<(templates: readonly PromptTemplate[]) => void>();
  private running: Promise<RevalidateOutcome> | null = null;
  private rerun = false;
  private readonly fetchFn: FetchLike;
  private readonly storage: StorageLike | null;
  private readonly url: string;
  private readonly key: string;

  constructor(options: TemplateStoreOptions) {
    this.fetchFn = options.fetch;
    this.storage = options.storage;
    this.url = options.url ?? TEMPLATES_URL;
    this.key = options.storageKey ?? TEMPLATES_STORAGE_KEY;
  }

  get templates(): readonly PromptTemplate[] {
    return this.list;
  }

  get etag(): string | null {
    return this.tag;
  }

  find(id: number): PromptTemplate | null {
    return this.list.find((t) => t.id === id) ?? null;
  }

  /** Call `fn` whenever the list is replaced; returns the unsubscribe function. */
  subscribe(fn: (templates: readonly PromptTemplate[]) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Read the cached list (if any). A broken cache is ignored, and its ETag with it. */
  load(): void {
    let raw: string | null = null;
    try {
      raw = this.storage?.getItem(this.key) ?? null;
    } catch {
      raw = null;
    }
    if (raw === null) return;
    let stored: unknown;
    try {
      stored = JSON.parse(raw);
    } catch {
      return;
    }
    if (!isObj(stored)) return;
    const list = parseTemplateList({ templates: stored["templates"] });
    if (list === null) return;
    this.list = list;
    this.tag = typeof stored["etag"] === "string" ? stored["etag"] : null;
    this.emit();
  }

  /**
   * `GET /api/templates/` with `If-None-Match`. Concurrent calls share one request; a call
   * made while a request is in flight (e.g. a `templates.changed` push) runs one more
   * request after it, since the one in flight may predate the change.
   */
  revalidate(): Promise<RevalidateOutcome> {
    if (this.running !== null) {
      this.rerun = true;
      return this.running;
    }
    const run = async (): Promise<RevalidateOutcome> => {
      try {
        let outcome: RevalidateOutcome;
        do {
          this.rerun = false;
          outcome = await this.fetchOnce();
        } while (this.rerun);
        return outcome;
      } finally {
        this.running = null; // synchronously with the last check of `rerun`
      }
    };
    this.running = run();
    return this.running;
  }

  /** The socket pushed `templates.changed`; nothing to do when we already have that ETag. */
  changed(etag: string | null): Promise<RevalidateOutcome> {
    if (etag !== null && this.tag !== null && sameEtag(etag, this.tag) && this.running === null) return Promise.resolve("not-modified");
    return this.revalidate();
  }

  private async fetchOnce(): Promise<RevalidateOutcome> {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (this.tag !== null) headers["If-None-Match"] = this.tag;
    try {
      const res = await this.fetchFn(this.url, { headers, credentials: "same-origin", cache: "no-store" });
      if (res.status === 304) return "not-modified";
      if (res.status !== 200) {
        console.warn(`chat: templates: HTTP ${res.status}, keeping the cached list`);
        return "error";
      }
      const list = parseTemplateList(await res.json());
      if (list === null) {
        console.warn("chat: templates: unexpected response, keeping the cached list");
        return "error";
      }
      this.list = list;
      this.tag = res.headers.get("ETag");
      this.persist();
      this.emit();
      return "updated";
    } catch (err) {
      // Offline, or a login redirect answered with HTML: keep what we have, quietly.
      console.warn("chat: templates: cannot revalidate, keeping the cached list", err);
      return "error";
    }
  }

  private persist(): void {
    const stored: Stored = { etag: this.tag, templates: this.list };
    try {
      this.storage?.setItem(this.key, JSON.stringify(stored));
    } catch {
      // Quota or privacy mode: the list stays in memory only.
    }
  }

  private emit(): void {
    for (const fn of Array.from(this.listeners)) {
      try {
        fn(this.list);
      } catch (err) {
        console.error("chat: templates listener failed", err);
      }
    }
  }
}

/** `localStorage`, or null where the browser blocks it (reading the property can throw). */
export function browserStorage(): StorageLike | null {
  try {
    return globalThis.localStorage ?? null;
  } catch {
    return null;
  }
}
