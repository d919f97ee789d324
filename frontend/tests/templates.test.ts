import assert from "node:assert/strict";
import { test } from "vitest";

import { parseServerFrame, templatedSendFrame, withFullText } from "../src/protocol.ts";
import {
  buildTemplatedSend,
  MAX_PATCH_CHARS,
  parseTemplateList,
  previewVariables,
  renderBody,
  TemplateDraft,
  TemplateStore,
  validateVariables,
  type FetchInit,
  type FetchResponseLike,
  type PromptTemplate,
  type StorageLike,
  type TemplateVariable,
  usePatchTools,
} from "../src/templates.ts";
import { applyPatch, makePatch, sha256Hex } from "../src/textpatch.ts";

usePatchTools({ makePatch, sha256Hex }); // as the chat page installs them

function variable(name: string, extra: Partial<TemplateVariable> = {}): TemplateVariable {
  return { name, label: name.toUpperCase(), type: "string", required: false, max_length: null, choices: [], ...extra };
}

function template(extra: Partial<PromptTemplate> = {}): PromptTemplate {
  return {
    id: 7,
    version: 3,
    sha256: "ab".repeat(32),
    name: "Trip",
    description: "",
    body: "Plan {{days}} days in {{city}}.",
    variables: [variable("city", { required: true, max_length: 5 }), variable("days", { type: "integer", required: true })],
    ...extra,
  };
}

// ---- renderBody ----

test("renderBody replaces declared placeholders, leaves everything else verbatim", () => {
  assert.equal(renderBody("Hi {{name}}!", { name: "Ann" }), "Hi Ann!");
  assert.equal(renderBody("{{unknown}} and {{name}}", { name: "x" }), "{{unknown}} and x");
  assert.equal(renderBody("{{ name }} {{Name}} {{na-me}} {{9name}} {{}} {name}", { name: "x" }), "{{ name }} {{Name}} {{na-me}} {{9name}} {{}} {name}");
  assert.equal(renderBody("{{{name}}}", { name: "x" }), "{x}");
  assert.equal(renderBody("{{_a1}}{{_a1}}", { _a1: "ab" }), "abab");
  assert.equal(renderBody("", { name: "x" }), "");
  assert.equal(renderBody("no placeholders", {}), "no placeholders");
});

test("renderBody: repeated placeholders, integers in decimal, no recursion", () => {
  assert.equal(renderBody("{{n}} + {{n}} = {{sum}}", { n: 2, sum: 4 }), "2 + 2 = 4");
  assert.equal(renderBody("{{n}}", { n: -0 }), "0");
  assert.equal(renderBody("{{n}}", { n: -12 }), "-12");
  assert.equal(renderBody("{{n}}", { n: 1e21 }), "1000000000000000000000");
  assert.equal(renderBody("{{a}} {{b}}", { a: "{{b}}", b: "B" }), "{{b}} B");
});

test("renderBody: unicode values and replacement-pattern characters are taken literally", () => {
  assert.equal(renderBody("Ort: {{city}}", { city: "Zürich 🇨🇭 e\u0301" }), "Ort: Zürich 🇨🇭 e\u0301");
  assert.equal(renderBody("{{a}}", { a: "$& $1 $$ $` $'" }), "$& $1 $$ $` $'");
  assert.equal(renderBody("😀{{a}}😀", { a: "" }), "😀😀");
  assert.equal(renderBody("multi\n{{a}}\r\n", { a: "line1\nline2" }), "multi\nline1\nline2\r\n");
});

test("renderBody never reads inherited properties", () => {
  assert.equal(renderBody("{{constructor}} {{__proto__}} {{to_string}}", {}), "{{constructor}} {{__proto__}} {{to_string}}");
  const own = Object.fromEntries([["__proto__", "P"]]) as Record<string, string>;
  assert.equal(renderBody("{{__proto__}}", own), "P");
});

// ---- validateVariables ----

test("validateVariables: required, max_length, integer, choice", () => {
  const t = template({
    variables: [
      variable("city", { required: true, max_length: 5 }),
      variable("days", { type: "integer", required: true }),
      variable("mood", { type: "choice", choices: ["calm", "wild"], required: true }),
      variable("note"),
    ],
  });
  const bad = validateVariables(t, { city: "Amsterdam", days: "1.5", mood: "sad" });
  assert.deepEqual(
    bad.errors.map((e) => [e.name, e.code]),
    [
      ["city", "max_length"],
      ["days", "integer"],
      ["mood", "choice"],
    ],
  );
  assert.match(bad.errors[0]?.message ?? "", /^CITY: .*5/);
  const missing = validateVariables(t, { city: "   ", days: "" });
  assert.deepEqual(
    missing.errors.map((e) => [e.name, e.code]),
    [
      ["city", "required"],
      ["days", "required"],
      ["mood", "required"],
    ],
  );
  const ok = validateVariables(t, { city: "Köln", days: " 007 ", mood: "wild", extra: "ignored" });
  assert.deepEqual(ok.errors, []);
  assert.deepEqual(ok.variables, { city: "Köln", days: 7, mood: "wild", note: "" });
});

test("validateVariables counts characters as code points and keeps strings verbatim", () => {
  const t = template({ variables: [variable("s", { max_length: 3 })] });
  assert.deepEqual(validateVariables(t, { s: "😀😀😀" }).errors, []);
  assert.equal(validateVariables(t, { s: "😀😀😀😀" }).errors[0]?.code, "max_length");
  assert.deepEqual(validateVariables(t, { s: " a " }).variables, { s: " a " });
});

test("validateVariables: integers must be safe decimal integers; optional empties are sent as \"\"", () => {
  const t = template({
    variables: [variable("n", { type: "integer" }), variable("c", { type: "choice", choices: ["x"] }), variable("s")],
  });
  for (const raw of ["1e3", "0x10", "12abc", "9007199254740993", "--1"]) {
    assert.equal(validateVariables(t, { n: raw }).errors[0]?.code, "integer", raw);
  }
  assert.deepEqual(validateVariables(t, { n: "-42" }).variables, { n: -42, c: "", s: "" });
  assert.deepEqual(validateVariables(t, { n: "+5", c: "x" }).variables, { n: 5, c: "x", s: "" });
  // Every declared variable is sent (the server renders each declared one), undeclared never.
  assert.deepEqual(validateVariables(t, { zzz: "1" }), { variables: { n: "", c: "", s: "" }, errors: [] });
  assert.equal(renderBody("[{{n}}|{{c}}|{{s}}]", validateVariables(t, {}).variables), "[||]");
});

test("previewVariables keeps only valid, non-empty values", () => {
  const t = template();
  assert.deepEqual(previewVariables(t, { city: "", days: "x" }), {});
  assert.deepEqual(previewVariables(t, { city: "Rome", days: "03" }), { city: "Rome", days: 3 });
  assert.equal(renderBody(t.body, previewVariables(t, { city: "Rome" })), "Plan {{days}} days in Rome.");
});

// ---- TemplateDraft ----

test("draft fills the textbox until the user edits it", () => {
  const t = template();
  const d = new TemplateDraft();
  let box = "";
  box = d.select(t, {}, box) ?? box;
  assert.equal(box, "Plan {{days}} days in {{city}}.");
  box = d.update({ city: "Rome" }, box) ?? box;
  assert.equal(box, "Plan {{days}} days in Rome.");
  box += " Please!"; // typed by hand
  assert.equal(d.untouched(box), false);
  assert.equal(d.update({ city: "Rome", days: "2" }, box), null);
  assert.equal(d.base, "Plan 2 days in Rome.", "base follows the latest render");
  assert.equal(d.select(null, {}, box), null, "typed text survives 'No template'");
});

test("draft never overwrites text typed before a template was chosen; 'No template' clears only generated text", () => {
  const d = new TemplateDraft();
  assert.equal(d.select(template(), {}, "my own words"), null);
  const e = new TemplateDraft();
  const box = e.select(template(), { city: "Oslo" }, "") ?? "";
  assert.equal(e.select(null, {}, box), "");
  assert.equal(e.template, null);
});

// ---- the templated chat.send ----

test("send frame: variables only when the text is exactly the render", async () => {
  const t = template();
  const { variables } = validateVariables(t, { city: "Rome", days: "2" });
  const frame = await buildTemplatedSend("id-1", t, variables, "Plan 2 days in Rome.");
  assert.deepEqual(frame, {
    type: "chat.send",
    id: "id-1",
    conversation_id: null,
    template: { id: 7, version: 3, sha256: "ab".repeat(32) },
    variables: { city: "Rome", days: 2 },
    result_sha256: await sha256Hex("Plan 2 days in Rome."),
  });
  assert.deepEqual(JSON.parse(JSON.stringify(frame)), frame);
});

test("send frame: a patch and the result hash when the user edited a long render", async () => {
  const long = "We need a detailed plan covering transport, food, museums and quiet evenings. ".repeat(6);
  const t = template({ body: `${long}Plan {{days}} days in {{city}}.` });
  const { variables } = validateVariables(t, { city: "Rome", days: "2" });
  const edited = `${long}Plan 2 relaxed days in Rome, with 🍝 and ☕.`;
  const frame = await buildTemplatedSend("id-2", t, variables, edited);
  assert.equal(frame.text, undefined);
  assert.equal(typeof frame.patch, "string");
  assert.ok((frame.patch ?? "").length + 64 < edited.length);
  assert.equal(frame.result_sha256, await sha256Hex(edited));
  assert.match(frame.result_sha256 ?? "", /^[0-9a-f]{64}$/);
  assert.equal(applyPatch(renderBody(t.body, variables), frame.patch ?? ""), edited);
  assert.deepEqual(Object.keys(frame).sort(), ["conversation_id", "id", "patch", "result_sha256", "template", "type", "variables"]);
});

test("send frame: the full text when it is shorter than a patch would be", async () => {
  const t = template();
  const { variables } = validateVariables(t, { city: "Rome", days: "2" });
  const edited = "Plan 2 relaxed days in Rome, with 🍝 and ☕.";
  const frame = await buildTemplatedSend("id-3", t, variables, edited);
  assert.equal(frame.text, edited);
  assert.equal(frame.patch, undefined);
});

test("sha256Hex hashes the UTF-8 bytes", async () => {
  assert.equal(await sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert.equal(await sha256Hex("é😀"), "1184d1f608158eea09d297565575892231550c403aaa913008d867a97cfd5c76");
});

test("send frame: full text when a patch cannot be made or is too long", async () => {
  const t = template({ body: "{{city}}", variables: [variable("city")] });
  const broken = { makePatch: () => "p", sha256Hex: () => Promise.reject(new Error("no WebCrypto")) };
  assert.deepEqual(await buildTemplatedSend("i", t, { city: "a" }, "b", broken), {
    type: "chat.send",
    id: "i",
    conversation_id: null,
    template: { id: 7, version: 3, sha256: "ab".repeat(32) },
    variables: { city: "a" },
    text: "b",
  });
  const long = { makePatch: () => "x".repeat(MAX_PATCH_CHARS + 1), sha256Hex: () => Promise.resolve("0".repeat(64)) };
  const f = await buildTemplatedSend("i", t, { city: "a" }, "b", long);
  assert.equal(f.text, "b");
  assert.equal(f.patch, undefined);
  // The real makePatch refuses a lone surrogate (the server could not hash it the same way).
  const lone = await quiet(() => buildTemplatedSend("i", t, { city: "a" }, "a\ud83d"));
  assert.equal(lone.text, "a\ud83d");
  assert.equal(lone.patch, undefined);
});

test("resend with the full text keeps id, template and variables and drops the patch", () => {
  const f = templatedSendFrame("i", template(), { city: "Rome", days: 2 }, { kind: "patch", patch: "@@ -1 +1 @@", resultSha256: "f".repeat(64) });
  assert.deepEqual(withFullText(f, "full"), {
    type: "chat.send",
    id: "i",
    conversation_id: null,
    template: { id: 7, version: 3, sha256: "ab".repeat(32) },
    variables: { city: "Rome", days: 2 },
    text: "full",
  });
});

test("parses chat.resend_full and templates.changed", () => {
  assert.deepEqual(parseServerFrame('{"type":"chat.resend_full","id":"c1","reason":"hash_mismatch"}'), {
    type: "chat.resend_full",
    id: "c1",
    reason: "hash_mismatch",
  });
  assert.equal(parseServerFrame('{"type":"chat.resend_full","reason":"x"}'), null);
  assert.deepEqual(parseServerFrame('{"type":"templates.changed","etag":"\\"v2\\""}'), { type: "templates.changed", etag: '"v2"' });
  assert.deepEqual(parseServerFrame('{"type":"templates.changed"}'), { type: "templates.changed", etag: null });
});

// ---- the list and the store ----

const WIRE = {
  templates: [
    {
      id: 7,
      name: "Trip <b>",
      description: "d",
      version: 3,
      sha256: "ab".repeat(32),
      body: "Plan {{days}} days in {{city}}.",
      variables: [
        { name: "city", label: "City", type: "string", required: true, max_length: 5, choices: null },
        { name: "days", label: "Days", type: "integer", required: true, max_length: null, choices: [] },
      ],
    },
  ],
};

test("parseTemplateList validates and skips malformed templates", () => {
  assert.equal(parseTemplateList({}), null);
  assert.equal(parseTemplateList([]), null);
  const list = parseTemplateList({ templates: [...WIRE.templates, { id: "x" }, null, { id: 1, version: 1, sha256: "s", body: "b", variables: [{}] }] });
  assert.equal(list?.length, 1);
  assert.equal(list?.[0]?.name, "Trip <b>");
  assert.deepEqual(list?.[0]?.variables[0], { name: "city", label: "City", type: "string", required: true, max_length: 5, choices: [] });
});

class MemoryStorage implements StorageLike {
  readonly data = new Map<string, string>();
  getItem(key: string): string | null {
    return this.data.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.data.set(key, value);
  }
}

type Reply = { status: number; etag?: string; body?: unknown } | Error;

function fakeFetch(replies: Reply[]) {
  const calls: { url: string; init: FetchInit }[] = [];
  const fetch = (url: string, init: FetchInit): Promise<FetchResponseLike> => {
    calls.push({ url, init });
    const r = replies.shift();
    if (r === undefined) return Promise.reject(new Error("unexpected fetch"));
    if (r instanceof Error) return Promise.reject(r);
    return Promise.resolve({
      status: r.status,
      headers: { get: (name: string) => (name.toLowerCase() === "etag" ? (r.etag ?? null) : null) },
      json: () => (r.body === undefined ? Promise.reject(new SyntaxError("not JSON")) : Promise.resolve(r.body)),
    });
  };
  return { fetch, calls };
}

function quiet<T>(fn: () => Promise<T>): Promise<T> {
  const warn = console.warn;
  console.warn = () => undefined;
  return fn().finally(() => {
    console.warn = warn;
  });
}

test("store: first load fetches without If-None-Match, persists the list with its ETag", async () => {
  const storage = new MemoryStorage();
  const f = fakeFetch([{ status: 200, etag: '"v1"', body: WIRE }]);
  const store = new TemplateStore({ fetch: f.fetch, storage });
  const seen: number[] = [];
  store.subscribe((list) => seen.push(list.length));
  store.load();
  assert.equal(store.templates.length, 0);
  assert.equal(await store.revalidate(), "updated");
  assert.equal(f.calls[0]?.url, "/api/templates/");
  assert.equal(f.calls[0]?.init.credentials, "same-origin");
  assert.equal(f.calls[0]?.init.headers["If-None-Match"], undefined);
  assert.deepEqual(seen, [1]);
  assert.equal(store.etag, '"v1"');
  const saved = JSON.parse(storage.getItem("chat.templates.v1") ?? "null") as { etag: string; templates: unknown[] };
  assert.equal(saved.etag, '"v1"');
  assert.equal(saved.templates.length, 1);
});

test("store: cached list is used at once and kept on 304 and on errors", async () => {
  const storage = new MemoryStorage();
  storage.setItem("chat.templates.v1", JSON.stringify({ etag: 'W/"v1"', templates: WIRE.templates }));
  const f = fakeFetch([{ status: 304 }, new TypeError("Failed to fetch"), { status: 500 }, { status: 200 }]);
  const store = new TemplateStore({ fetch: f.fetch, storage });
  let notified = 0;
  store.subscribe(() => notified++);
  store.load();
  assert.equal(notified, 1);
  assert.equal(store.find(7)?.version, 3);
  assert.equal(await store.revalidate(), "not-modified");
  assert.equal(f.calls[0]?.init.headers["If-None-Match"], 'W/"v1"');
  await quiet(async () => {
    assert.equal(await store.revalidate(), "error"); // offline
    assert.equal(await store.revalidate(), "error"); // server error
    assert.equal(await store.revalidate(), "error"); // 200 that is not JSON (login page)
  });
  assert.equal(notified, 1);
  assert.equal(store.templates.length, 1);
  assert.equal(store.etag, 'W/"v1"');
});

test("store: 200 replaces the list, persists it, and a push with a new ETag refetches", async () => {
  const storage = new MemoryStorage();
  storage.setItem("chat.templates.v1", JSON.stringify({ etag: '"v1"', templates: WIRE.templates }));
  const v2 = { templates: [{ ...WIRE.templates[0], version: 4, sha256: "cd".repeat(32) }] };
  const f = fakeFetch([{ status: 200, etag: '"v2"', body: v2 }]);
  const store = new TemplateStore({ fetch: f.fetch, storage });
  store.load();
  assert.equal(await store.changed('"v1"'), "not-modified");
  assert.equal(await store.changed("v1"), "not-modified", "the push may carry the bare tag");
  assert.equal(f.calls.length, 0, "a push with our own ETag needs no request");
  assert.equal(await store.changed('"v2"'), "updated");
  assert.equal(store.find(7)?.version, 4);
  const again = new TemplateStore({ fetch: fakeFetch([]).fetch, storage });
  again.load();
  assert.equal(again.etag, '"v2"');
  assert.equal(again.find(7)?.sha256, "cd".repeat(32));
});

test("store: a push during a request runs one more request after it", async () => {
  let release: () => void = () => undefined;
  const calls: string[] = [];
  const fetch = (_url: string, init: FetchInit): Promise<FetchResponseLike> => {
    calls.push(init.headers["If-None-Match"] ?? "-");
    const etag = `"v${calls.length}"`;
    const res: FetchResponseLike = { status: 200, headers: { get: () => etag }, json: () => Promise.resolve(WIRE) };
    return calls.length === 1 ? new Promise((r) => (release = () => r(res))) : Promise.resolve(res);
  };
  const store = new TemplateStore({ fetch, storage: null });
  const first = store.revalidate();
  const second = store.changed('"other"');
  release();
  assert.equal(await first, "updated");
  assert.equal(await second, "updated");
  assert.deepEqual(calls, ["-", '"v1"']);
  assert.equal(store.etag, '"v2"');
});

test("store: broken or blocked storage is ignored", async () => {
  const junk = new MemoryStorage();
  junk.setItem("chat.templates.v1", "{not json");
  const s1 = new TemplateStore({ fetch: fakeFetch([]).fetch, storage: junk });
  s1.load();
  assert.equal(s1.templates.length, 0);
  assert.equal(s1.etag, null);

  const throwing: StorageLike = {
    getItem: () => {
      throw new Error("SecurityError");
    },
    setItem: () => {
      throw new Error("QuotaExceededError");
    },
  };
  const s2 = new TemplateStore({ fetch: fakeFetch([{ status: 200, etag: '"v1"', body: WIRE }]).fetch, storage: throwing });
  s2.load();
  assert.equal(await s2.revalidate(), "updated");
  assert.equal(s2.templates.length, 1);
});
