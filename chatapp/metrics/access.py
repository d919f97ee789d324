"""Who may read `/metrics`: a bearer token when one is set, else a list of networks.

Metrics reveal load, error rates and usage, so they are not public. With `METRICS_TOKEN`
set, a scrape must send `Authorization: Bearer <token>` (compared in constant time); without
it, only clients whose address is in `METRICS_ALLOWED_NETS` get them, and only when they came
directly: behind a reverse proxy on the same host every visitor has the proxy's loopback
address, so a request carrying a forwarding header (X-Forwarded-For, Forwarded, X-Real-IP)
needs the token (the header's value is never trusted, as anyone can send it).
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
from dataclasses import dataclass
from typing import Literal

from django.core.exceptions import ImproperlyConfigured

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Denied:
    status: Literal[401, 403]
    reason: str


def scrape_denied(
    *,
    token: str,
    allowed_nets: tuple[str, ...],
    authorization: str,
    remote_addr: str,
    forwarded: bool = False,
) -> Denied | None:
    """None when this request may read the metrics, else why not (401 or 403). `forwarded`:
    it came through a proxy, so its address says nothing of the client."""
    if token:
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            presented.strip().encode(), token.encode()
        ):
            return None
        return Denied(401, "A valid 'Authorization: Bearer <METRICS_TOKEN>' header is required.")
    if forwarded:
        return Denied(
            403, "Metrics through a proxy need METRICS_TOKEN (the proxy's address says nothing)."
        )
    if address_allowed(remote_addr, networks=allowed_networks(allowed_nets)):
        return None
    return Denied(403, "Metrics are only served to the networks in METRICS_ALLOWED_NETS.")


def address_allowed(remote_addr: str, *, networks: tuple[Network, ...]) -> bool:
    try:
        address = ipaddress.ip_address(remote_addr.strip())
    except ValueError:  # no address (a unix socket) or garbage: not on any allowed network
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # a dual-stack listener reports ::ffff:127.0.0.1
    return any(address in network for network in networks)


@functools.lru_cache(maxsize=8)
def allowed_networks(nets: tuple[str, ...]) -> tuple[Network, ...]:
    """Parse the CIDR list once; a malformed entry is a configuration error that says which."""
    parsed: list[Network] = []
    for net in nets:
        try:
            parsed.append(ipaddress.ip_network(net, strict=False))
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"METRICS_ALLOWED_NETS: {net!r} is not a network (write CIDRs such as "
                f"10.0.0.0/8 or ::1/128, comma-separated): {exc}"
            ) from exc
    return tuple(parsed)
