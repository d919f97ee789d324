"""`python -m chatapp.grpc_api [--host H] [--port P]`: the gRPC Chat service, its own process.

Like a web process, it runs an answer relay for the answers its streams start, on the same
Redis and PostgreSQL, so it scales the same way: run as many as needed behind a gRPC-aware
load balancer. It needs `REDIS_URL` (workers are reached through Redis; the embedded default
has its worker inside `manage.py serve`). It serves the standard health service
(`grpc.health.v1`, SERVING once the relay is up) and server reflection, so `grpcurl` and load
balancers work without the proto file. SIGTERM stops taking streams and gives open ones
`--grace` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

GRACE_S = 30.0  # on SIGTERM, open streams get this long (compose's stop_grace_period is longer)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="0.0.0.0 in a container")
    parser.add_argument("--port", type=int, default=50051, help="0: a free one (printed)")
    parser.add_argument("--grace", type=float, default=GRACE_S)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings.local")
    import django

    django.setup()
    from django.conf import settings

    if not settings.REDIS_URL:
        print(
            "error: the gRPC service needs REDIS_URL: it reaches the inference workers through "
            "Redis (the embedded default runs its worker inside manage.py serve)",
            file=sys.stderr,
        )
        return 2
    asyncio.run(_serve(args.host, args.port, args.grace))
    return 0


async def _serve(host: str, port: int, grace_s: float) -> None:
    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection

    from chatapp.answers.runtime import answer_runtime, answer_runtime_close
    from chatapp.grpc_api.generated import chat_pb2, chat_pb2_grpc
    from chatapp.grpc_api.service import ChatService

    server = grpc.aio.server()
    chat_pb2_grpc.add_ChatServicer_to_server(ChatService(), server)  # type: ignore[no-untyped-call]
    healthy = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(healthy, server)
    service_name = chat_pb2.DESCRIPTOR.services_by_name["Chat"].full_name
    reflection.enable_server_reflection(
        (service_name, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    bound = server.add_insecure_port(f"{host}:{port}")
    await server.start()
    # the relay finishes answers a crashed process left streaming, as a web process's does
    await answer_runtime()
    for name in ("", service_name):
        await healthy.set(name, health_pb2.HealthCheckResponse.SERVING)
    print(f"gRPC Chat service on {host}:{bound} (health: SERVING)", flush=True)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    await stopping.wait()
    for name in ("", service_name):
        await healthy.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    await server.stop(grace_s)
    await answer_runtime_close()


if __name__ == "__main__":
    raise SystemExit(main())
