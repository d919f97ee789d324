// Entry point of the admin latency dashboard (chatapp/latency/templates/admin/latency/
// dashboard.html): draws the charts from the page's `latency-data` JSON block with uPlot and
// refreshes charts and summary from `data-data-url` every `data-refresh-seconds`.

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import "./latency.css";

import {
  chartSpecs,
  formatNumber,
  parseLatencyData,
  statusText,
  summaryCells,
  type ChartSpec,
  type LatencyData,
} from "./latencyseries.ts";

const CHART_HEIGHT = 220;

function chartOptions(spec: ChartSpec, width: number, xRange: () => [number, number]): uPlot.Options {
  return {
    width,
    height: CHART_HEIGHT,
    scales: {
      x: { time: true, range: xRange },
      // From 0, with room above the highest point (an empty chart still gets an axis).
      y: { range: (_u, _min, max) => uPlot.rangeNum(0, max > 0 ? max : 1, 0.1, true) },
    },
    series: [
      {},
      ...spec.series.map((s) => ({
        label: s.label,
        stroke: s.color,
        width: 2,
        spanGaps: false,
        // Sparse buckets are single points between gaps: always mark them.
        points: { show: true, size: 5 },
        value: (_u: uPlot, v: number | null) => (v === null ? "\u2013" : `${formatNumber(v)} ${spec.unit}`),
      })),
    ],
    axes: [{}, { label: spec.unit, size: 60 }],
  };
}

export class LatencyDashboard {
  private readonly charts = new Map<string, uPlot>();
  // The window moves on with each refresh: the x scale reads the latest range from here.
  private readonly xRanges = new Map<string, [number, number]>();
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly root: HTMLElement,
    private readonly dataUrl: string,
    private readonly refreshMs: number,
  ) {}

  render(data: LatencyData): void {
    for (const spec of chartSpecs(data)) {
      const section = this.root.querySelector<HTMLElement>(`.latency-chart[data-chart="${spec.key}"]`);
      if (section === null) continue;
      this.xRanges.set(spec.key, spec.xRange);
      const chart = this.charts.get(spec.key);
      if (chart === undefined) {
        const xRange = (): [number, number] => this.xRanges.get(spec.key) ?? spec.xRange;
        this.charts.set(spec.key, new uPlot(chartOptions(spec, this.widthOf(section), xRange), spec.data, section));
      } else {
        chart.setData(spec.data);
      }
    }
    for (const [field, text] of Object.entries(summaryCells(data))) {
      const cell = this.root.querySelector(`[data-field="${field}"]`);
      if (cell !== null) cell.textContent = text;
    }
    this.setStatus(statusText(data), false);
    this.root.dataset["updated"] = data.now;
  }

  start(): void {
    window.addEventListener("resize", () => {
      for (const [key, chart] of this.charts) {
        const section = this.root.querySelector<HTMLElement>(`.latency-chart[data-chart="${key}"]`);
        if (section !== null) chart.setSize({ width: this.widthOf(section), height: CHART_HEIGHT });
      }
    });
    this.schedule();
  }

  async refresh(): Promise<void> {
    try {
      const response = await fetch(this.dataUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (response.status === 401 || response.status === 403) {
        this.setStatus("Your staff session has ended: reload the page to log in again.", true);
        return;
      }
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      this.render(parseLatencyData(await response.json()));
    } catch (error) {
      this.setStatus(`Could not refresh (${String(error)}); trying again in ${this.refreshMs / 1000} s.`, true);
    }
  }

  private schedule(): void {
    // One refresh at a time: the next is planned when the previous one has finished.
    this.timer = setTimeout(() => {
      void this.refresh().finally(() => this.schedule());
    }, this.refreshMs);
  }

  private setStatus(text: string, problem: boolean): void {
    const status = this.root.querySelector<HTMLElement>("#latency-status");
    if (status === null) return;
    status.textContent = text;
    status.classList.toggle("latency-problem", problem);
  }

  private widthOf(section: HTMLElement): number {
    return Math.max(280, section.clientWidth - 16);
  }
}

function main(doc: Document): void {
  const root = doc.getElementById("latency-dashboard");
  const block = doc.getElementById("latency-data");
  if (root === null || block === null) return;
  const dashboard = new LatencyDashboard(
    root,
    root.dataset["dataUrl"] ?? "",
    Number(root.dataset["refreshSeconds"] ?? "15") * 1000,
  );
  dashboard.render(parseLatencyData(JSON.parse(block.textContent ?? "null")));
  dashboard.start();
}

if (typeof document !== "undefined") {
  main(document);
}
