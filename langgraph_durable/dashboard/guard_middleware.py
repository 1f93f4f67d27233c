"""The dashboard's guards (``security.py``) applied to every request, as ASGI middleware
in front of the Starlette app: the ``Host`` check, the token check with its cookie and
redirect, and the security headers on every response."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from . import security

HOST_REFUSED = ("this dashboard does not answer to this host name: start it with "
                "--allowed-host NAME (create_app(allowed_hosts=[...])) to reach it by that name\n")
"""The body of the 400 answer to a request whose ``Host`` is not allowed."""


class GuardMiddleware:
    """ASGI middleware: the ``Host`` check (``security.host_ok``: 400 for a name not in
    ``hosts``), the token check (``security.token_ok``; a first visit to a page with
    ``?token=`` sets the cookie and is redirected, to the same path of this app, without
    it; JSON and event streams just take it) and the security headers on every
    response."""

    def __init__(self, app: Any, token: str | None, hosts: frozenset[str]) -> None:
        self.app, self.token, self.hosts = app, token, hosts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        headers = dict(request.headers)
        if not security.host_ok(headers.get("host"), self.hosts):
            refused = PlainTextResponse(HOST_REFUSED, status_code=400,
                                        headers=security.HEADERS)
            await refused(scope, receive, send)
            return
        if not security.token_ok(self.token, headers, request.cookies,
                                 dict(request.query_params)):
            response: Response = HTMLResponse(
                "<!doctype html><title>token required</title><h1>token required</h1><p>"
                "This dashboard needs its token: open it with ?token=... once, or send "
                "Authorization: Bearer ...</p>", status_code=401, headers=security.HEADERS)
            await response(scope, receive, send)
            return
        page = "/api/" not in request.url.path and "/events/" not in request.url.path
        if self.token and page and "token" in request.query_params:
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            root = security.safe_redirect((scope.get("root_path") or "") + "/")
            path = request.url.path  # percent-encoded; the decoded path is checked too
            if not security.safe_redirect(scope.get("path") or "", ""):
                path = root
            path = security.safe_redirect(path, root)
            kept = rest and path == request.url.path  # a path refused: its query too
            url = path + ("?" + urlencode(rest) if kept else "")
            response = RedirectResponse(url, status_code=303, headers=security.HEADERS)
            response.set_cookie(security.COOKIE, self.token, httponly=True, samesite="strict")
            await response(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [
                    *message.get("headers", []),
                    *((k.encode(), v.encode()) for k, v in security.HEADERS.items())]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
