import { describe, expect, test } from "vitest";

import { chartSpecs, formatNumber, formatPercent, NO_DATA, parseLatencyData, statusText, summaryCells, type LatencyData } from "../src/latencyseries.ts";

/** A 4-bucket report shaped like GET /admin/latency/data.json (the server sends 60). */
function sample(overrides: Partial<LatencyData> = {}): LatencyData {
  return {
    window: "1h",
    window_label: "Last hour",
    bucket_seconds: 60,
    bucket_label: "1 min",
    now: "2026-11-29T12:00:30.250000+00:00",
    rows: 5,
    row_cap: 50000,
    capped: false,
    covered_from: "2026-11-29T11:57:00+00:00",
    buckets: {
      start: [1795953420, 1795953480, 1795953540, 1795953600],
      answers: [0, 3, 0, 2],
      ttft_ms: { p50: [null, 50, null, 5], p95: [null, 100, null, 7], p99: [null, 100, null, 7] },
      client_ttft_ms: { p50: [null, 65, null, null], p95: [null, 115, null, null], p99: [null, 115, null, null] },
      faq_hit_rate: [null, 0.25, null, 1],
      prefix_cache_hit_rate: [null, 0.4567, null, null],
      answers_per_minute: [0, 3, 0, 4],
      tokens_per_second: [0, 3.5, 0, 1],
    },
    summary: {
      answers: 5,
      complete: 3,
      stopped: 1,
      failed: 1,
      faq_answers: 2,
      ttft_ms: { p50: 40, p95: 100, p99: 100, count: 5 },
      client_ttft_ms: { p50: 65, p95: 115, p99: 115, count: 3 },
      faq_hit_rate: 0.5,
      prefix_cache_hit_rate: 0.4567,
      answers_per_minute: 1.6806,
      tokens_per_second: null,
      errors: [
        { code: "worker_lost", count: 3 },
        { code: "interrupted", count: 1 },
      ],
    },
    handoffs: {
      asks: 3,
      conversations: 40,
      rate: 0.075,
      waiting_now: 1,
      first_response_s: { p50: 42.5, p95: 310, count: 2 },
      outcomes: { close: 1, release: 1, cancel: 0 },
      resolutions: [{ resolution: "refund sent", count: 1 }],
    },
    ...overrides,
  };
}

describe("data -> chart series", () => {
  test("every chart shares the bucket starts as x and spans the whole window", () => {
    const specs = chartSpecs(sample());
    expect(specs.map((s) => s.key)).toEqual(["ttft", "client_ttft", "cache", "answers", "tokens"]);
    for (const spec of specs) {
      expect(spec.data[0]).toEqual([1795953420, 1795953480, 1795953540, 1795953600]);
      expect(spec.data.length).toBe(spec.series.length + 1);
      expect(spec.xRange).toEqual([1795953420, 1795953660]); // the last bucket ends 60 s later
    }
  });

  test("TTFT charts have P50, P95 and P99 in that order, in ms", () => {
    const [server, client] = chartSpecs(sample());
    expect(server?.series.map((s) => s.label)).toEqual(["P50", "P95", "P99"]);
    expect(server?.unit).toBe("ms");
    expect(server?.data.slice(1)).toEqual([
      [null, 50, null, 5],
      [null, 100, null, 7],
      [null, 100, null, 7],
    ]);
    expect(client?.data[2]).toEqual([null, 115, null, null]);
  });

  test("hit rates are drawn as percentages with one decimal", () => {
    const cache = chartSpecs(sample()).find((s) => s.key === "cache");
    expect(cache?.series.map((s) => s.label)).toEqual(["FAQ hit rate", "Prefix cache hit rate"]);
    expect(cache?.data[1]).toEqual([null, 25, null, 100]);
    expect(cache?.data[2]).toEqual([null, 45.7, null, null]);
  });

  test("throughput charts take the rates as they are", () => {
    const specs = chartSpecs(sample());
    expect(specs.find((s) => s.key === "answers")?.data[1]).toEqual([0, 3, 0, 4]);
    expect(specs.find((s) => s.key === "tokens")?.data[1]).toEqual([0, 3.5, 0, 1]);
  });
});

describe("summary texts", () => {
  test("cells are formatted like the server-rendered table", () => {
    const cells = summaryCells(sample());
    expect(cells["ttft_ms.p95"]).toBe("100");
    expect(cells["ttft_ms.count"]).toBe("5");
    expect(cells["client_ttft_ms.p50"]).toBe("65");
    expect(cells["outcomes"]).toBe("3 / 1 / 1");
    expect(cells["faq_hit_rate"]).toBe("50.0 %");
    expect(cells["prefix_cache_hit_rate"]).toBe("45.7 %");
    expect(cells["answers_per_minute"]).toBe("1.7");
    expect(cells["tokens_per_second"]).toBe(NO_DATA);
    expect(cells["errors"]).toBe("worker_lost: 3, interrupted: 1");
    expect(cells["handoffs.rate"]).toBe("7.5 %");
    expect(cells["handoffs.first_response"]).toBe("42.5 / 310 (2 replied)");
    expect(cells["handoffs.outcomes"]).toBe("1 / 1 / 0");
    expect(cells["handoffs.resolutions"]).toBe("refund sent: 1");
  });

  test("numbers and percentages", () => {
    expect(formatNumber(12)).toBe("12");
    expect(formatNumber(12.34)).toBe("12.3");
    expect(formatNumber(1234.5678)).toBe("1235");
    expect(formatNumber(0.0336)).toBe("0.034"); // a quiet hour's answers per minute
    expect(formatNumber(0.5)).toBe("0.5");
    expect(formatNumber(0)).toBe("0");
    expect(formatNumber(null)).toBe(NO_DATA);
    expect(formatPercent(1)).toBe("100.0 %");
    expect(formatPercent(null)).toBe(NO_DATA);
  });

  test("the status line names the window, the buckets and the time in UTC", () => {
    expect(statusText(sample())).toBe("Last hour: 5 answers in 1 min buckets, as of 12:00:30 UTC.");
  });

  test("an empty window says so, and a capped one says what it shows", () => {
    const empty = sample();
    empty.summary = { ...empty.summary, answers: 0, errors: [] };
    expect(statusText(empty)).toMatch(/0 answers .* No answers in this window\.$/);
    expect(summaryCells(empty)["errors"]).toBe("none");
    const capped = sample({ capped: true, row_cap: 3 });
    expect(statusText(capped)).toContain("Only the newest 3 answers are shown (since 2026-11-29 11:57 UTC).");
  });
});

describe("parsing", () => {
  test("a well-formed report parses as itself", () => {
    const data = sample();
    expect(parseLatencyData(JSON.parse(JSON.stringify(data)))).toEqual(data);
  });

  test("malformed data is refused with what is wrong", () => {
    expect(() => parseLatencyData(null)).toThrow("latency data: not an object");
    expect(() => parseLatencyData({ window: "1h" })).toThrow("no buckets");
    const short = sample();
    short.buckets = { ...short.buckets, tokens_per_second: [1] };
    expect(() => parseLatencyData(short)).toThrow("tokens_per_second does not have 4 values");
    const text = sample();
    text.buckets = { ...text.buckets, ttft_ms: { ...text.buckets.ttft_ms, p95: [null, "100", null, 7] as never } };
    expect(() => parseLatencyData(text)).toThrow("ttft_ms.p95 has a non-number");
  });
});
