"""The dashboard's guards, free of any web framework: which addresses may be bound
without a token, the token check, the CSRF token of write forms, response headers."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Mapping

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
