"""The dashboard's guards, free of any web framework: which addresses may be bound
without a token, which ``Host`` names a request may carry (DNS rebinding), the token
check, the CSRF token of write forms, where a redirect may go, response headers."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Iterable, Mapping

from ..errors import ConfigurationError

TOKEN_ENV = "LGD_DASHBOARD_TOKEN"
"""Environment variable holding the dashboard's token (``--token`` wins over it)."""

COOKIE = "lgd_dashboard"
"""Cookie carrying the token after a first visit with ``?token=`` (HttpOnly, SameSite=Strict)."""

HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
"""Sent with every response: no inline script runs (even if some value escaped the
templates' escaping), no other site frames the pages, no URL leaks to another site in a Referer."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_bind(host: str, token: str | None, allow_writes: bool = False) -> None:
    """Refuse a configuration that would expose the dashboard: binding ``host`` that is
    not a loopback address without a token, or writes (``allow_writes``) without a
    token. Raises ``ConfigurationError`` naming the address and what to pass."""
    if not token and not is_loopback(host):
        raise ConfigurationError(
            f"dashboard: binding {host!r} (not a loopback address) needs a token: pass "
            f"--token or set {TOKEN_ENV} (or bind 127.0.0.1)")
    if allow_writes and not token:
        raise ConfigurationError(
            f"dashboard: --allow-writes needs a token (--token or {TOKEN_ENV}): writes are "
            "checked against it and a CSRF token derived from it")


def new_token() -> str:
    """A random token (32 URL-safe characters)."""
    return secrets.token_urlsafe(24)


def token_ok(expected: str | None, headers: Mapping[str, str], cookies: Mapping[str, str],
             query: Mapping[str, str]) -> bool:
    """Whether a request carries the token: ``Authorization: Bearer``, the cookie or
    ``?token=`` (compared in constant time). Always True without a token configured."""
    if not expected:
        return True
    auth = headers.get("authorization", "")
    given = [auth[7:] if auth.lower().startswith("bearer ") else "",
             cookies.get(COOKIE, ""), query.get("token", "")]
    return any(g and hmac.compare_digest(g.encode(), expected.encode()) for g in given)


def csrf_token(secret: str) -> str:
    """The CSRF token of write forms: derived from the dashboard's token, so a page from
    another site, which cannot read this one, cannot know it."""
    return hmac.new(secret.encode(), b"langgraph-durable dashboard csrf",
                    hashlib.sha256).hexdigest()[:40]


def csrf_ok(secret: str | None, form_value: str, headers: Mapping[str, str]) -> bool:
    """A write request passes the CSRF check: its form carries ``csrf_token(secret)``
    and, when the browser says where it comes from (``Sec-Fetch-Site``, an ``Origin``
    other than ``null``), it comes from this same site."""
    if not secret or not hmac.compare_digest(form_value.encode(), csrf_token(secret).encode()):
        return False
    if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin, host = headers.get("origin"), headers.get("host", "")
    return origin in (None, "null") or origin.split("://", 1)[-1] == host


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
"""The ``Host`` names every dashboard answers (with any port): a page of another site
that a DNS-rebinding attack points at 127.0.0.1 still sends its own name."""


def host_name(header: str) -> str:
    """The name of a ``Host`` header without its port, lower case, no final dot:
    ``"LocalHost.:8765"`` -> ``"localhost"``, ``"[::1]:80"`` -> ``"[::1]"``."""
    host = header.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    return host.rsplit(":", 1)[0].rstrip(".") if host.count(":") <= 1 else f"[{host}]"


def allowed_host_names(extra: Iterable[str] = ()) -> frozenset[str]:
    """``LOOPBACK_HOSTS`` and the names of ``extra`` (``"dash.example.com"``, an address,
    ``"*.example.com"`` for its subdomains, ``"*"`` for any: only behind a proxy that
    checks the name itself), as ``host_ok`` compares them. Raises ``ConfigurationError``
    for an empty name or one holding a scheme, a path or a space."""
    names = set(LOOPBACK_HOSTS)
    for raw in extra:
        name = raw.strip()
        if not name or any(c in name for c in "/ \\@?#") or "://" in name:
            raise ConfigurationError(
                f"dashboard: allowed host {raw!r} is not a host name: give a name such as "
                "dash.example.com (any port), an address, or *.example.com")
        names.add(name if name in ("*",) or name.startswith("*.") else host_name(name))
    return frozenset(n.lower() for n in names)


def host_ok(header: str | None, allowed: frozenset[str]) -> bool:
    """Whether a request's ``Host`` header names one of ``allowed`` (``allowed_host_names``),
    whatever its port. A request without one is refused."""
    if not header:
        return False
    if "*" in allowed:
        return True
    name = host_name(header)
    if name in allowed:
        return True
    return any(a.startswith("*.") and name.endswith(a[1:]) and len(name) > len(a) - 1
               for a in allowed)


def bound_host(host: str) -> str | None:
    """The ``Host`` name a browser sends for the address ``host`` the dashboard binds
    (``"10.0.0.5"``, ``"[fd00::5]"``, a host name as given), allowed at once; None for a
    wildcard bind (``0.0.0.0``, ``::``: the names it is reached by are not known) and for
    loopback names (always allowed)."""
    bare = host.strip("[]")
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return host.lower() if host and not is_loopback(host) else None
    if address.is_unspecified:
        return None
    return f"[{address}]" if address.version == 6 else str(address)


def safe_redirect(path: str, root: str = "/") -> str:
    """``path`` when it is a path of this app (one ``/`` first, no second ``/`` or
    ``\\`` after it, no backslash, space or control character anywhere: a browser reads
    ``//x``, ``/\\x`` and ``/<tab>/x`` as another site), else ``root``."""
    if (not path.startswith("/") or path[1:2] in ("/", "\\")
            or any(c == "\\" or ord(c) <= 0x20 or ord(c) == 0x7F for c in path)):
        return root
    return path
