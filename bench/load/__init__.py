"""Load benchmark: `python -m bench.load --configs full,baseline,vllm [--rates 0.5,1,2,4]`.

Real clients against real servers, one configuration at a time on the same model, workload
and seed: WebSocket clients on the app's `/ws/chat/` (`full`, `baseline`), a streaming HTTP
client on an OpenAI-compatible server (`vllm`: vLLM's own server; `external`: any running
one). Poisson arrivals per offered rate (or a closed loop per concurrency), a warm-up, a
fixed number of requests per point. bench/README.md ("Load benchmark") says how to run it and
what it measured.

Modules: `workload` (the request mix and arrival times), `clients` (WebSocket and OpenAI
clients, open and closed loop), `targets` (the configurations: start, wait, stop), `seed`
(the app's database before its server starts), `results` (per-request and per-point
numbers, the sustained rate, the goals), `report` (markdown table, plots), `run` (the run).
"""
