"""Prometheus metrics of the web process and the protected `/metrics` endpoint."""
