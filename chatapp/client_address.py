"""Which network address a request comes from, for limits counted per address (login
failures, a website's visitors), the same for HTTP requests and sockets."""

from __future__ import annotations

from django.conf import settings


def client_address(*, forwarded_for: str, remote: str | None) -> str | None:
    """The client's address.

    Behind LOGIN_THROTTLE_PROXY_COUNT reverse proxies that each append the address they saw to
    X-Forwarded-For (`forwarded_for`), the client is that many entries from the right;
    everything left of it is the client's own word. Without proxies (the default) only the
    socket's peer (`remote`) counts, so a forged header cannot dodge a limit.
    """
    proxies = int(settings.LOGIN_THROTTLE_PROXY_COUNT)
    if proxies > 0:
        forwarded = [part.strip() for part in forwarded_for.split(",") if part.strip()]
        if len(forwarded) >= proxies:
            return forwarded[-proxies]
    return remote or None
