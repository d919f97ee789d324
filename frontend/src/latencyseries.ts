// The latency dashboard's data (`GET /admin/latency/data.json`, chatapp/latency/selectors.py)
// turned into what the page shows: one column-oriented data set per chart (uPlot's format:
// x values first, then one array per series, null = no data, drawn as a gap) and the texts of
// the summary table. Pure: no DOM, no uPlot, so it is tested in Node.

export type Values = (number | null)[];

export interface QuantileSeries {
  p50: Values;
  p95: Values;
  p99: Values;
}

export interface Quantiles {
  p50: number | null;
  p95: number | null;
  p99: number | null;
  count: number;
}

export interface LatencyData {
  window: string;
  window_label: string;
  bucket_seconds: number;
  bucket_label: string;
  now: string;
  rows: number;
  row_cap: number;
  capped: boolean;
  covered_from: string;
  buckets: {
    start: number[];
    answers: number[];
    ttft_ms: QuantileSeries;
    client_ttft_ms: QuantileSeries;
    faq_hit_rate: Values;
    prefix_cache_hit_rate: Values;
    answers_per_minute: Values;
    tokens_per_second: Values;
  };
  summary: {
    answers: number;
    complete: number;
    stopped: number;
    failed: number;
    faq_answers: number;
    ttft_ms: Quantiles;
    client_ttft_ms: Quantiles;
    faq_hit_rate: number | null;
    prefix_cache_hit_rate: number | null;
    answers_per_minute: number | null;
    tokens_per_second: number | null;
    errors: { code: string; count: number }[];
  };
  /** Asks for a person in the window (chatapp/latency/handoffs.py). */
  handoffs: {
    asks: number;
    conversations: number;
    rate: number | null;
    waiting_now: number;
    first_response_s: { p50: number | null; p95: number | null; count: number };
    outcomes: { close: number; release: number; cancel: number };
    resolutions: { resolution: string; count: number }[];
  };
}

export interface SeriesSpec {
  label: string;
  color: string;
}

export interface ChartSpec {
  /** The `data-chart` of the page's section the chart goes into. */
  key: string;
  /** Shown after values in the legend ("ms", "%", ...). */
  unit: string;
  series: SeriesSpec[];
  /** [x (bucket starts, Unix seconds), ...one array per series]. */
  data: [number[], ...Values[]];
  /** The x axis spans the whole window: first bucket's start to the last one's end. */
  xRange: [number, number];
}

/** Shown where there is no value (same as the server-rendered table). */
export const NO_DATA = "\u2013";

const QUANTILE_COLORS: readonly SeriesSpec[] = [
  { label: "P50", color: "#2b6cb0" },
  { label: "P95", color: "#dd6b20" },
  { label: "P99", color: "#c53030" },
];

/** Check the JSON's shape (every series as long as the buckets); throws a readable Error. */
export function parseLatencyData(value: unknown): LatencyData {
  const data = value as LatencyData;
  const fail = (what: string): never => {
    throw new Error(`latency data: ${what}`);
  };
  if (typeof value !== "object" || value === null) fail("not an object");
  if (typeof data.window !== "string") fail("no window");
  const buckets = data.buckets;
  if (typeof buckets !== "object" || buckets === null || !Array.isArray(buckets.start)) fail("no buckets");
  const n = buckets.start.length;
  const series: [string, unknown][] = [
    ["answers", buckets.answers],
    ["faq_hit_rate", buckets.faq_hit_rate],
    ["prefix_cache_hit_rate", buckets.prefix_cache_hit_rate],
    ["answers_per_minute", buckets.answers_per_minute],
    ["tokens_per_second", buckets.tokens_per_second],
  ];
  for (const group of ["ttft_ms", "client_ttft_ms"] as const) {
    const quantiles = buckets[group] as Partial<QuantileSeries> | undefined;
    for (const q of ["p50", "p95", "p99"] as const) series.push([`${group}.${q}`, quantiles?.[q]]);
  }
  for (const [name, values] of series) {
    if (!Array.isArray(values) || values.length !== n) fail(`${name} does not have ${n} values`);
    if (!(values as unknown[]).every((v) => v === null || typeof v === "number")) fail(`${name} has a non-number`);
  }
  if (typeof data.summary !== "object" || data.summary === null) fail("no summary");
  if (typeof data.handoffs !== "object" || data.handoffs === null) fail("no handoffs");
  return data;
}

/** The dashboard's charts, in page order. Rates become percentages. */
export function chartSpecs(data: LatencyData): ChartSpec[] {
  const b = data.buckets;
  const x = b.start;
  const xRange: [number, number] = [x[0] ?? 0, (x[x.length - 1] ?? 0) + data.bucket_seconds];
  const percent = (values: Values): Values => values.map((v) => (v === null ? null : Math.round(v * 1000) / 10));
  const chart = (key: string, unit: string, series: SeriesSpec[], values: Values[]): ChartSpec => ({
    key,
    unit,
    series,
    data: [x, ...values],
    xRange,
  });
  return [
    chart("ttft", "ms", [...QUANTILE_COLORS], [b.ttft_ms.p50, b.ttft_ms.p95, b.ttft_ms.p99]),
    chart("client_ttft", "ms", [...QUANTILE_COLORS], [b.client_ttft_ms.p50, b.client_ttft_ms.p95, b.client_ttft_ms.p99]),
    chart(
      "cache",
      "%",
      [
        { label: "FAQ hit rate", color: "#2f855a" },
        { label: "Prefix cache hit rate", color: "#6b46c1" },
      ],
      [percent(b.faq_hit_rate), percent(b.prefix_cache_hit_rate)],
    ),
    chart("answers", "/min", [{ label: "Answers", color: "#2b6cb0" }], [b.answers_per_minute]),
    chart("tokens", "tok/s", [{ label: "Generated tokens", color: "#b7791f" }], [b.tokens_per_second]),
  ];
}

/**
 * A latency or rate, like the server's `number`: whole above 100, one decimal above 1
 * (12.0 -> "12"), two significant digits below (a quiet hour's 0.034 answers a minute).
 */
export function formatNumber(value: number | null): string {
  if (value === null) return NO_DATA;
  const size = Math.abs(value);
  if (size >= 100) return value.toFixed(0);
  if (size >= 1) return value.toFixed(1).replace(/\.0$/, "");
  return String(Number(value.toPrecision(2)));
}

/** 0.4567 -> "45.7 %", like the server's `percent`. */
export function formatPercent(rate: number | null): string {
  return rate === null ? NO_DATA : `${(rate * 100).toFixed(1)} %`;
}

/** Texts of the summary tables' cells, by their `data-field`. */
export function summaryCells(data: LatencyData): Record<string, string> {
  const s = data.summary;
  const cells: Record<string, string> = {
    answers: String(s.answers),
    outcomes: `${s.complete} / ${s.stopped} / ${s.failed}`,
    faq_hit_rate: formatPercent(s.faq_hit_rate),
    prefix_cache_hit_rate: formatPercent(s.prefix_cache_hit_rate),
    answers_per_minute: formatNumber(s.answers_per_minute),
    tokens_per_second: formatNumber(s.tokens_per_second),
    errors: s.errors.length ? s.errors.map((e) => `${e.code}: ${e.count}`).join(", ") : "none",
  };
  const h = data.handoffs;
  const first = h.first_response_s;
  Object.assign(cells, {
    "handoffs.asks": String(h.asks),
    "handoffs.rate": formatPercent(h.rate),
    "handoffs.waiting_now": String(h.waiting_now),
    "handoffs.first_response": `${formatNumber(first.p50)} / ${formatNumber(first.p95)} (${first.count} replied)`,
    "handoffs.outcomes": `${h.outcomes.close} / ${h.outcomes.release} / ${h.outcomes.cancel}`,
    "handoffs.resolutions": h.resolutions.length ? h.resolutions.map((r) => `${r.resolution}: ${r.count}`).join(", ") : "none",
  });
  for (const group of ["ttft_ms", "client_ttft_ms"] as const) {
    const q = s[group];
    cells[`${group}.count`] = String(q.count);
    for (const p of ["p50", "p95", "p99"] as const) cells[`${group}.${p}`] = formatNumber(q[p]);
  }
  return cells;
}

/** The line above the tables: window, answers, bucket size, time; capped or empty notes. */
export function statusText(data: LatencyData): string {
  const n = data.summary.answers;
  const time = new Date(data.now).toISOString().slice(11, 19);
  let text = `${data.window_label}: ${n} answer${n === 1 ? "" : "s"} in ${data.bucket_label} buckets, as of ${time} UTC.`;
  if (data.capped) {
    const since = new Date(data.covered_from).toISOString().slice(0, 16).replace("T", " ");
    text += ` Only the newest ${data.row_cap} answers are shown (since ${since} UTC).`;
  }
  if (n === 0) text += " No answers in this window.";
  return text;
}
