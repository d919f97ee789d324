// @vitest-environment jsdom
import { afterEach, describe, expect, test, vi } from "vitest";

// uPlot watches the device pixel ratio with matchMedia when it is imported; jsdom has none.
vi.hoisted(() => {
  window.matchMedia = ((query: string) => ({ matches: false, media: query, addEventListener() {}, removeEventListener() {} })) as unknown as typeof window.matchMedia;
});

import { LatencyDashboard } from "../src/latency.ts";
import type { LatencyData } from "../src/latencyseries.ts";

// The page's summary markup (admin/latency/dashboard.html) without the chart sections: charts
// need a canvas, which jsdom lacks (the browser test draws them).
function page(): HTMLElement {
  document.body.innerHTML = `
    <div id="latency-dashboard">
      <p id="latency-status" role="status">Last hour: 0 answers in 1 min buckets, as of 11:59:00 UTC.</p>
      <table><tbody>
        <tr><td data-field="ttft_ms.p95">–</td><td data-field="answers">0</td><td data-field="errors">none</td><td data-field="handoffs.waiting_now">0</td></tr>
      </tbody></table>
    </div>`;
  return document.getElementById("latency-dashboard") as HTMLElement;
}

function report(): LatencyData {
  const n = 2;
  const values = (v: number | null) => Array<number | null>(n).fill(v);
  return {
    window: "1h",
    window_label: "Last hour",
    bucket_seconds: 60,
    bucket_label: "1 min",
    now: "2026-11-29T12:00:30+00:00",
    rows: 3,
    row_cap: 50000,
    capped: false,
    covered_from: "2026-11-29T11:01:00+00:00",
    buckets: {
      start: [1795953540, 1795953600],
      answers: [1, 2],
      ttft_ms: { p50: values(40), p95: values(90), p99: values(90) },
      client_ttft_ms: { p50: values(null), p95: values(null), p99: values(null) },
      faq_hit_rate: values(0),
      prefix_cache_hit_rate: values(0.5),
      answers_per_minute: values(1),
      tokens_per_second: values(0.5),
    },
    summary: {
      answers: 3,
      complete: 2,
      stopped: 0,
      failed: 1,
      faq_answers: 0,
      ttft_ms: { p50: 40, p95: 90, p99: 90, count: 2 },
      client_ttft_ms: { p50: null, p95: null, p99: null, count: 0 },
      faq_hit_rate: 0,
      prefix_cache_hit_rate: 0.5,
      answers_per_minute: 0.05,
      tokens_per_second: 0.01,
      errors: [{ code: "worker_lost", count: 1 }],
    },
    handoffs: {
      asks: 2,
      conversations: 3,
      rate: 0.6667,
      waiting_now: 1,
      first_response_s: { p50: 12, p95: 12, count: 1 },
      outcomes: { close: 1, release: 0, cancel: 0 },
      resolutions: [],
    },
  };
}

function respond(status: number, body: unknown): void {
  vi.stubGlobal("fetch", vi.fn(async () => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } })));
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("refresh", () => {
  test("new data replaces the summary cells and the status line", async () => {
    const root = page();
    respond(200, report());
    const dashboard = new LatencyDashboard(root, "/admin/latency/data.json?window=1h", 15000);

    await dashboard.refresh();

    expect(fetch).toHaveBeenCalledWith("/admin/latency/data.json?window=1h", expect.objectContaining({ credentials: "same-origin" }));
    expect(root.querySelector('[data-field="ttft_ms.p95"]')?.textContent).toBe("90");
    expect(root.querySelector('[data-field="answers"]')?.textContent).toBe("3");
    expect(root.querySelector('[data-field="errors"]')?.textContent).toBe("worker_lost: 1");
    expect(root.querySelector('[data-field="handoffs.waiting_now"]')?.textContent).toBe("1");
    expect(root.querySelector("#latency-status")?.textContent).toBe("Last hour: 3 answers in 1 min buckets, as of 12:00:30 UTC.");
    expect(root.dataset["updated"]).toBe("2026-11-29T12:00:30+00:00");
  });

  test("an ended staff session says to log in again and keeps the numbers", async () => {
    const root = page();
    respond(403, { error: { code: "forbidden", message: "Only staff may see latency data." } });

    await new LatencyDashboard(root, "/data.json", 15000).refresh();

    const status = root.querySelector("#latency-status");
    expect(status?.textContent).toBe("Your staff session has ended: reload the page to log in again.");
    expect(status?.classList.contains("latency-problem")).toBe(true);
    expect(root.querySelector('[data-field="answers"]')?.textContent).toBe("0");
  });

  test("a server error or malformed data is shown and retried on the next tick", async () => {
    const root = page();
    respond(500, {});
    await new LatencyDashboard(root, "/data.json", 15000).refresh();
    expect(root.querySelector("#latency-status")?.textContent).toBe("Could not refresh (Error: HTTP 500); trying again in 15 s.");

    respond(200, { window: "1h" });
    await new LatencyDashboard(root, "/data.json", 15000).refresh();
    expect(root.querySelector("#latency-status")?.textContent).toContain("latency data: no buckets");
  });

  test("refreshes run one after another at the configured interval", async () => {
    vi.useFakeTimers();
    try {
      const root = page();
      respond(200, report());
      new LatencyDashboard(root, "/data.json", 15000).start();
      await vi.advanceTimersByTimeAsync(14999);
      expect(fetch).toHaveBeenCalledTimes(0);
      await vi.advanceTimersByTimeAsync(1);
      expect(fetch).toHaveBeenCalledTimes(1);
      await vi.advanceTimersByTimeAsync(15000);
      expect(fetch).toHaveBeenCalledTimes(2);
    } finally {
      vi.useRealTimers();
    }
  });
});
