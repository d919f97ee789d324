#!/bin/sh
# Prometheus reads a bearer token only from its config or from a file; compose hands over the
# web's METRICS_TOKEN as an environment variable, so write it to the file prometheus.yml names
# (in Prometheus's data volume, readable by its user only), then start Prometheus as the image
# would, with a retention limit.
set -eu
umask 077
printf '%s' "${METRICS_TOKEN:-}" > /prometheus/.metrics_token
if [ -z "${METRICS_TOKEN:-}" ]; then
  echo "entrypoint: METRICS_TOKEN is empty: web /metrics will refuse the scrape (403); set it in .env" >&2
fi
exec /bin/prometheus \
  --config.file=/etc/prometheus/prometheus.yml \
  --storage.tsdb.path=/prometheus \
  --storage.tsdb.retention.time="${PROMETHEUS_RETENTION:-15d}" \
  "$@"
