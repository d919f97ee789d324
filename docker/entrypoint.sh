#!/bin/sh
# The images' single entry point: `docker run IMAGE <role> [args]`.
# Roles are the processes of docs/operations.md and the `command:` of docker-compose.yml;
# tests/deploy/test_compose.py checks the three agree.
set -eu

role="${1:-web}"
[ "$#" -gt 0 ] && shift

case "$role" in
  web)
    # Static files are served from the image by WhiteNoise (no collectstatic step).
    exec python manage.py serve --host 0.0.0.0 --port "${PORT:-8000}" --no-worker "$@"
    ;;
  grpc)
    # the gRPC Chat service (docs/grpc.md): its own process, over the same Redis and database
    exec python -m chatapp.grpc_api --host 0.0.0.0 --port 50051 "$@"
    ;;
  migrate)
    exec python manage.py migrate --noinput "$@"
    ;;
  worker)
    # a worker without the FAQ cache's verifier trains it into the data volume in the
    # background (answering exact FAQ repeats until then): nothing here waits for it
    exec python -m inference "$@"
    ;;
  prepare-model)
    exec python -m modelprep prepare --model "${PREPARE_MODEL:-smollm2}" "$@"
    ;;
  celery-worker)
    exec celery -A chatapp worker --loglevel=INFO "$@"
    ;;
  celery-beat)
    # The schedule lives in Redis-free local state: keep it on the data volume.
    exec celery -A chatapp beat --loglevel=INFO --schedule /data/celerybeat-schedule "$@"
    ;;
  healthcheck-web)
    # Django answers only its ALLOWED_HOSTS: ask with the first of them as Host.
    exec python - <<'PY'
import os, sys, urllib.request
host = os.environ.get("ALLOWED_HOSTS", "").split(",")[0].strip().lstrip(".")
host = "localhost" if host in ("", "*") else host
url = "http://127.0.0.1:%s/healthz" % os.environ.get("PORT", "8000")
with urllib.request.urlopen(urllib.request.Request(url, headers={"Host": host}), timeout=3) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
    ;;
  healthcheck-grpc)
    # the standard gRPC health service: SERVING once the service's answer relay is up
    exec python - <<'PY'
import sys, grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
with grpc.insecure_channel("127.0.0.1:50051") as channel:
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)
sys.exit(0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1)
PY
    ;;
  healthcheck-worker)
    exec python -m inference.healthcheck "$@"
    ;;
  manage)
    exec python manage.py "$@"
    ;;
  *)
    echo "unknown role '$role': web, grpc, migrate, worker, prepare-model, celery-worker, celery-beat, healthcheck-web, healthcheck-grpc, healthcheck-worker, manage" >&2
    exit 64
    ;;
esac
