"""Origins as browsers send them (`scheme://host[:port]`), read from what an admin types.

A browser's `Origin` header is lower-case, has no path and leaves out the scheme's default
port, so an allowed origin is normalised the same way before it is stored: then one string
comparison decides, and `https://Shop.example:443/` typed in admin matches what Chromium sends.
"""

from __future__ import annotations

from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


class OriginError(ValueError):
    """The text is not an origin; the message says why, in words for the admin form."""


def origin_normalised(text: str) -> str:
    """`text` as the browser would send it in `Origin`, or OriginError."""
    raw = text.strip()
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise OriginError(f"{raw!r} is not an origin: {exc}") from None
    if parts.scheme.lower() not in _DEFAULT_PORTS:
        raise OriginError(f"{raw!r} is not an origin: it must start with https:// or http://")
    if not parts.hostname:
        raise OriginError(f"{raw!r} is not an origin: it has no host")
    if "*" in raw:
        raise OriginError(f"{raw!r}: wildcards are not allowed; list each origin")
    if parts.username is not None or parts.password is not None:
        raise OriginError(f"{raw!r} is not an origin: it holds a user name or password")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise OriginError(
            f"{raw!r} is not an origin: leave out the path, e.g. {parts.scheme}://{parts.netloc}"
        )
    scheme, host = parts.scheme.lower(), parts.hostname.lower()
    if ":" in host:  # IPv6, bracketed as in a URL
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def origins_parsed(text: str) -> tuple[str, ...]:
    """One origin a line (blank lines skipped, repeats dropped), each normalised; OriginError
    names the first bad line."""
    seen: dict[str, None] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            seen[origin_normalised(line)] = None
        except OriginError as exc:
            raise OriginError(f"line {number}: {exc}") from None
    return tuple(seen)
