// The browser's side of the protocol against frames the server's own schemas produce.
// tests/golden/protocol.json is GENERATED from chatapp/realtime/schemas.py (with
// src/generated/frames.ts) by `python -m chatapp.realtime.golden` (or `make protocol`);
// tests/chatapp/realtime/test_golden_frames.py fails while either is stale.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import Ajv2020 from "ajv/dist/2020.js";
import { test } from "vitest";

import { CLIENT_FRAME_TYPES, ERROR_CODES, SERVER_FRAME_TYPES, type ClientFrame, type ClientFrameType } from "../src/generated/frames.ts";
import {
  clientTimingFrame,
  contactFrame,
  draftFrame,
  editFrame,
  feedbackFrame,
  handoffFrame,
  hasCode,
  parseServerFrame,
  regenerateFrame,
  resumeFrame,
  sendFrame,
  stopFrame,
  syncFrame,
  typingFrame,
  templatedSendFrame,
  withFullText,
} from "../src/protocol.ts";

type Frame = Record<string, unknown>;
interface Named {
  name: string;
  frame: Frame;
}
interface Mutated extends Named {
  type: string;
  field: string;
  mutation: "missing" | "wrong_type" | "unknown_value";
}
interface Golden {
  client_frame_types: string[];
  server_frame_types: string[];
  error_codes: string[];
  client_frames: Named[];
  server_frames: Named[];
  invalid_server_frames: Mutated[];
  schema: { client: Frame; server: Frame };
}

const HERE = dirname(fileURLToPath(import.meta.url));
const golden = JSON.parse(readFileSync(join(HERE, "golden", "protocol.json"), "utf8")) as Golden;

const parse = (frame: Frame) => parseServerFrame(JSON.stringify(frame));
const typeOf = (frame: Frame) => String(frame["type"]);

// Where parseServerFrame takes a frame the schema refuses, on purpose (old or new servers):
// a missing or malformed field becomes this value instead of dropping the frame.
const NULL_USAGE = { prompt_tokens: null, completion_tokens: null, cached_prompt_tokens: null };
const NULL_TIMINGS = { queue_wait_ms: null, ttft_ms: null, total_ms: null };
const LENIENT: Record<string, Record<string, unknown>> = {
  "chat.done": { finish_reason: "", usage: NULL_USAGE, timings: NULL_TIMINGS, source: "model", faq_entry_id: null, resumed: false, hops: null, suggested_entries: [], offer_person: false },
  "chat.error": { retry_after_s: null },
  "chat.resend_full": { reason: "" },
  "templates.changed": { etag: null },
};
// Fields whose unknown values are kept as sent: a newer server's error code or resend reason.
const OPEN: Record<string, string[]> = { "chat.error": ["code"], "chat.resend_full": ["reason"] };

test("the generated declarations and the golden frames come from the same schemas", () => {
  assert.deepEqual([...CLIENT_FRAME_TYPES], golden.client_frame_types);
  assert.deepEqual([...SERVER_FRAME_TYPES], golden.server_frame_types);
  assert.deepEqual([...ERROR_CODES], golden.error_codes);
  assert.deepEqual(new Set(golden.server_frames.map((f) => typeOf(f.frame))), new Set(golden.server_frame_types));
  assert.deepEqual(new Set(golden.client_frames.map((f) => typeOf(f.frame))), new Set(golden.client_frame_types));
});

test("every golden server frame parses, with the same fields and values", () => {
  for (const { name, frame } of golden.server_frames) {
    assert.deepEqual(parse(frame), frame, name);
  }
});

test("every error code parses and keeps its code", () => {
  for (const code of golden.error_codes) {
    const item = golden.server_frames.find((f) => typeOf(f.frame) === "chat.error" && f.frame["code"] === code);
    assert.ok(item !== undefined, `no golden chat.error with code ${code}`);
    const f = parse(item.frame);
    assert.ok(f !== null && f.type === "chat.error", code);
    assert.equal(f.code, code);
    assert.ok(hasCode(f, code as (typeof ERROR_CODES)[number]));
  }
});

test("frames the schemas refuse are refused, except where the parser is lenient on purpose", () => {
  const used = new Set<string>();
  assert.ok(golden.invalid_server_frames.length > 0);
  for (const { name, type, field, mutation, frame } of golden.invalid_server_frames) {
    const lenient = LENIENT[type] ?? {};
    let expected: Frame | null = null;
    if (mutation === "unknown_value" && OPEN[type]?.includes(field)) {
      used.add(`open ${type}.${field}`);
      expected = frame;
    } else if (Object.hasOwn(lenient, field)) {
      used.add(`lenient ${type}.${field}`);
      expected = { ...frame, [field]: lenient[field] };
    }
    const got = parse(frame);
    if (expected === null) assert.equal(got, null, `${name}: accepted ${JSON.stringify(got)}`);
    else assert.deepEqual(got, expected, name);
  }
  // Every leniency above is exercised (none is left over from a field that is gone).
  for (const [type, fields] of Object.entries(LENIENT)) {
    for (const field of Object.keys(fields)) assert.ok(used.has(`lenient ${type}.${field}`), `LENIENT ${type}.${field} is not used`);
  }
  for (const [type, fields] of Object.entries(OPEN)) {
    for (const field of fields) assert.ok(used.has(`open ${type}.${field}`), `OPEN ${type}.${field} is not used`);
  }
});

// The JSON Schemas (as pydantic writes them) through a standard validator.
function validator(schema: Frame) {
  const ajv = new Ajv2020({ allErrors: true });
  ajv.addFormat("uuid", /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
  // pydantic's OpenAPI-style `discriminator` (with `mapping`) is an annotation here: oneOf decides.
  const { discriminator: _discriminator, ...rest } = schema;
  return ajv.compile(rest);
}
const acceptsClient = validator(golden.schema.client);
const acceptsServer = validator(golden.schema.server);

test("the golden frames agree with the JSON Schemas", () => {
  for (const { name, frame } of golden.client_frames) assert.ok(acceptsClient(frame), `${name}: ${JSON.stringify(acceptsClient.errors)}`);
  for (const { name, frame } of golden.server_frames) assert.ok(acceptsServer(frame), `${name}: ${JSON.stringify(acceptsServer.errors)}`);
  for (const { name, frame } of golden.invalid_server_frames) assert.ok(!acceptsServer(frame), name);
});

const ID = "4b0e2a86-5d43-4c1e-9a57-2f1c3e0d9b61";
const MESSAGE = "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a";
const CONVERSATION = "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d";
const SHA = "ab".repeat(32);
const TEMPLATE = { id: 3, version: 2, sha256: SHA };

function timing(ms: number): ClientFrame {
  const f = clientTimingFrame(ID, MESSAGE, ms);
  assert.ok(f !== null);
  return f;
}

// Every frame the page builds, per type: a client frame added to the schemas does not compile
// here until the page can build it.
const BUILT: Record<ClientFrameType, ClientFrame[]> = {
  "chat.send": [
    sendFrame(ID, null, "hi"),
    sendFrame(ID, CONVERSATION, "hi again"),
    templatedSendFrame(ID, TEMPLATE, { city: "Rome", days: 2 }, { kind: "exact", resultSha256: SHA }),
    templatedSendFrame(ID, TEMPLATE, { city: "Rome" }, { kind: "patch", patch: "@@ -1 +1 @@\n-a\n+b\n", resultSha256: SHA }),
    templatedSendFrame(ID, TEMPLATE, {}, { kind: "text", text: "the full text" }),
    withFullText(templatedSendFrame(ID, TEMPLATE, { days: 1 }, { kind: "patch", patch: "p", resultSha256: SHA }), "full"),
  ],
  "chat.stop": [stopFrame(ID, null), stopFrame(ID, MESSAGE)],
  "chat.regenerate": [regenerateFrame(ID, MESSAGE, false), regenerateFrame(ID, MESSAGE, true)],
  "chat.feedback": [feedbackFrame(ID, MESSAGE, "up"), feedbackFrame(ID, MESSAGE, "down")],
  "chat.resume": [resumeFrame(ID, MESSAGE, 0), resumeFrame(ID, MESSAGE, 41.7)],
  "chat.edit": [editFrame(ID, MESSAGE, "edited question")],
  "chat.client_timing": [timing(0.06), timing(141.63), timing(600_000)],
  "chat.draft": [draftFrame(ID, null, "where is my"), draftFrame(ID, CONVERSATION, "and how long\n")],
  "chat.handoff": [handoffFrame(ID, CONVERSATION, "request"), handoffFrame(ID, CONVERSATION, "cancel"), contactFrame(ID, CONVERSATION, "a@b.example")],
  "chat.sync": [syncFrame(ID, CONVERSATION, null), syncFrame(ID, CONVERSATION, MESSAGE)],
  "chat.typing": [typingFrame(ID, CONVERSATION)],
};

test("every frame the page builds is one the server's schema accepts", () => {
  assert.deepEqual(Object.keys(BUILT).sort(), [...golden.client_frame_types].sort());
  for (const [type, frames] of Object.entries(BUILT)) {
    for (const frame of frames) {
      assert.equal(frame.type, type);
      assert.ok(acceptsClient(frame), `${JSON.stringify(frame)}: ${JSON.stringify(acceptsClient.errors)}`);
    }
  }
});
