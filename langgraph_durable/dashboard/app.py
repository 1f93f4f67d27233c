"""The dashboard's ASGI application (Starlette + Jinja2; the ``dashboard`` extra).

Routes (GET unless said): ``/`` the thread list, ``/events/threads`` its live rows
(server-sent events), ``/thread`` a thread (timeline, state, time machine) and
``/events/thread`` its latest checkpoint and its actions' runs and audit entries, live
(the page offers to reload), ``/thread/size`` its storage panel (HTML the page loads
after it is shown), ``/diff``,
``/tiers`` and ``/events/tiers`` (its figures and health verdict, live), ``/memory``
(the long-term memory store's namespaces and a namespace's items, ``?ns=a.b``); JSON:
``/api/threads``, ``/api/thread``, ``/api/thread/<thread_id>/size`` (``inspection.thread_size``),
``/api/tiers``, ``/api/audit``; POST ``/fork`` and
``/act`` (answer an interrupt, retry, run, cancel a queued run; only with
``allow_writes``, ``/act`` with ``graphs``); ``/static/*``. Every value from state goes
through Jinja's autoescaping; the content security policy lets no inline script run.
Values are decoded strictly (``inspection.strict``): a stored entry naming a type not
allowed is shown as a placeholder, never imported nor run. A request whose ``Host`` is
not an allowed name gets 400 (DNS rebinding); redirects stay on the app's own paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import ConfigurationError
from ..inspection import audit, lookup, render, timeline, versions
from ..inspection import graph_actions as actions_mod
from ..inspection.health import HealthOptions
from ..inspection.strict import strict_view
from ..inspection.thread_size import thread_size
from ..inspection.timeline import RUNNING_WINDOW_S
from . import action_routes as actions
from . import listing, page_templates, runpage, security, tiers, views
from . import memory_page as memory
from . import run_executor as runs
from .guard_middleware import GuardMiddleware
from .page_templates import HERE

log = logging.getLogger("langgraph_durable.dashboard")


def create_app(saver: Any, *, token: str | None = None, allow_writes: bool = False,
               poll_s: float = 1.0, running_window_s: float = RUNNING_WINDOW_S,
               lag_every_s: float = 10.0, index_ttl_s: float = 5.0,
               allowed_hosts: Iterable[str] = (), allow_types: Iterable[Any] = (),
               tiers_poll_s: float = 5.0,
               health_options: HealthOptions | None = None,
               state_version: int | None = None,
               graphs: Mapping[str, Any] | None = None, run_workers: int = 2,
               run_queue: int = 8) -> Any:
    """The dashboard as an ASGI app for ``saver`` (a ``DurableSaver``; mount it in a
    FastAPI/Starlette app or serve it with uvicorn). It reads through a copy of the saver
    whose serializer is strict (``inspection.strict.strict_view``) and which shows
    checkpoints as stored, whatever the saver's ``state_version`` (no migration on read,
    no refusal of a newer thread: ``versions.as_stored``): the saver's own
    serializer (cipher, blob store) with every msgpack type outside LangChain's messages,
    LangGraph's own types and ``allow_types`` shown as ``<not decoded: module.Name (not
    in the allowlist)>``, never imported nor run.

    Args:
        token: required from every request (``?token=`` once, then a cookie, or
            ``Authorization: Bearer``) when given; needed for writes.
        allow_writes: enable the time machine (``POST /fork``); needs ``token`` (and the
            saver a running flusher somewhere: a fork flushes first).
        poll_s: how often (seconds) the one poll loop of the open thread lists asks
            MongoDB which thread summaries changed (and Redis whether entries wait),
            while a browser watches a list; each open list is read again when something
            changed (at least every ``listing.TICK_S``) and sends only changed rows.
        running_window_s: a thread with nodes still to run is ``running`` while its
            latest checkpoint is younger than this (seconds), ``stalled`` after.
        lag_every_s: seconds between two flush-lag samples for the tiers page's plot.
        index_ttl_s: unused (the thread list reads the thread summaries, one indexed
            query a page); kept for callers of earlier releases.
        allowed_hosts: ``Host`` names answered besides localhost, 127.0.0.1 and [::1]
            (any port): the names and addresses browsers reach the dashboard by
            (``"dash.example.com"``, ``"10.0.0.5"``, ``"*.example.com"``); any other
            gets 400, so a DNS-rebinding page cannot read it.
        allow_types: types decoded besides the built-in allowlist: ``"module.Class"``
            strings, ``(module, name)`` pairs or classes (your state's own classes).
        tiers_poll_s: how often (seconds, at least ``poll_s``) the open tiers page reads
            both tiers again and updates itself (its figures and the health verdict).
        health_options: the verdict's thresholds (``inspection.health.HealthOptions``:
            flush lag over 60 s and an outbox 80% full are ``degraded`` by default).
        state_version: the application's current state version: the thread list then
            counts the threads that need migration (their latest root checkpoint is
            older; unversioned ones count as the saver's ``unversioned_state_version``)
            and those written by newer code (one ``$group`` over the thread summaries).
            None: each thread's version is shown, nothing is counted.
        graphs: ``{name: compiled graph}``: with ``allow_writes`` the thread page answers
            pending interrupts, retries failed or stalled threads and runs forks with
            them (``dashboard.action_routes``; the graph's own checkpointer is not used: runs
            read and write through a strict copy of ``saver`` that keeps its state
            versions). A thread's graph is its metadata's ``lgd_graph``, else the only
            one given, else the operator's choice on the page.
        run_workers, run_queue: the runs' executor: runs at once, and more waiting
            (beyond that an action is refused, 503).

    Raises ``ConfigurationError`` for ``allow_writes`` without a token or an allowed host
    that is no host name, ``ValueError`` for an ``allow_types`` entry of another form."""
    security.check_bind("127.0.0.1", token, allow_writes)
    hosts = security.allowed_host_names(allowed_hosts)
    allow_types = list(allow_types)
    store = memory.memory_store(saver, allow_types)
    runner = strict_view(saver, allow_types, tolerant=False)  # runs: the app's versions
    saver = versions.as_stored(strict_view(saver, allow_types))  # checkpoints as stored
    acts = actions.Actions(saver, runner, graphs or {}, audit.who_of_token(token),
                           workers=run_workers, max_queued=run_queue,
                           running_window_s=running_window_s)
    env = page_templates.templates()
    samples = tiers.LagSamples(every_s=lag_every_s)
    if state_version is not None and (isinstance(state_version, bool)
                                      or not isinstance(state_version, int)
                                      or state_version < 1):
        raise ConfigurationError(f"state_version must be an int >= 1, got {state_version!r}")
    unversioned = saver.state_versions.unversioned  # the saver's unversioned_state_version
    feed = listing.ListFeed(saver, poll_s)  # one poll loop for every open thread list
    csrf = security.csrf_token(token) if token else ""

    def page(name: str, code: int = 200, **data: Any) -> HTMLResponse:
        html = env.get_template(name).render(allow_writes=allow_writes, csrf=csrf,
                                             current_state_version=state_version,
                                             unversioned_as=unversioned, **data)
        return HTMLResponse(html, status_code=code)

    def guarded(fn: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def handler(request: Request) -> Response:
            try:
                return await fn(request)  # type: ignore[no-any-return]
            except lookup.LookupFailedError as exc:
                return page("error.html", 404, title="not found", message=str(exc))
            except (lookup.ForkError, ValueError) as exc:
                return page("error.html", 400, title="refused", message=str(exc))
            except Exception as exc:  # logged by type only: no state value in the logs
                log.warning("dashboard %s %s failed: %s", request.method, request.url.path,
                            type(exc).__name__)
                return page("error.html", 500, title="error",
                            message=f"{type(exc).__name__} (see the server's log)")
        return handler

    def list_of(args: listing.ListArgs) -> dict[str, Any]:
        return listing.thread_list(saver, args, running_window_s=running_window_s,
                                   state_version=state_version, unversioned_as=unversioned,
                                   census=feed.census)

    async def threads_page(request: Request) -> Response:
        args = listing.parse_args(request.query_params)
        data = await run_in_threadpool(list_of, args)
        return page("threads.html", filters=listing.FILTERS, **data)

    async def threads_json(request: Request) -> Response:
        args = listing.parse_args(request.query_params)
        data = await run_in_threadpool(list_of, args)
        return JSONResponse(render.jsonable({**data, "args": args.params()}))

    async def threads_events(request: Request) -> Response:
        args = listing.parse_args(request.query_params)
        row, empty = env.get_template("_row.html"), env.get_template("_empty.html")
        stream = listing.row_events(
            request.is_disconnected, feed, lambda: list_of(args),
            lambda r: row.render(r=r, qs=env.globals["qs"],
                                 current_state_version=state_version,
                                 unversioned_as=unversioned),
            lambda data: empty.render(**data))
        return StreamingResponse(stream, media_type="text/event-stream",
                                 headers={"x-accel-buffering": "no"})

    def _thread_args(request: Request) -> tuple[str, str]:
        thread = request.query_params.get("thread_id", "")
        if not thread:
            raise ValueError("thread_id is missing")
        return thread, request.query_params.get("ns", "")

    async def thread_page(request: Request) -> Response:
        thread, ns = _thread_args(request)
        data = await run_in_threadpool(views.thread_detail, saver, thread, ns,
                                       request.query_params.get("checkpoint") or None,
                                       **runpage.run_args(request.query_params))
        panel = await run_in_threadpool(acts.panel, thread, ns)
        return page("thread.html", actions=panel, **data)

    async def thread_json(request: Request) -> Response:
        thread, ns = _thread_args(request)
        data = await run_in_threadpool(views.thread_detail, saver, thread, ns,
                                       request.query_params.get("checkpoint") or None,
                                       **runpage.run_args(request.query_params))
        return JSONResponse(render.jsonable(data))

    async def thread_size_part(request: Request) -> Response:
        thread, _ns = _thread_args(request)
        data = await run_in_threadpool(runpage.size_view, saver, thread)
        html = env.get_template("_size.html").render(thread_id=thread, size=data)
        return HTMLResponse(html)

    async def thread_size_json(request: Request) -> Response:
        report = await run_in_threadpool(thread_size, saver, request.path_params["thread_id"])
        return JSONResponse(report.as_dict())

    async def thread_events(request: Request) -> Response:
        thread, ns = _thread_args(request)
        conf = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}

        log_template = env.get_template("_audit.html")

        def latest() -> str:
            tup = saver.get_tuple(conf)
            if tup is None:
                return json.dumps({"checkpoint_id": None})
            return json.dumps({"checkpoint_id": tup.config["configurable"]["checkpoint_id"],
                               "step": tup.metadata.get("step"),
                               "status": timeline.status(tup, None, running_window_s)[
                                   "status"]})

        def activity() -> str:  # this dashboard's runs and the audit log, as HTML
            html = log_template.render(actions={"runs": acts.runs.of_thread(thread),
                                                "audit": acts.log(thread)},
                                       allow_writes=allow_writes, csrf=csrf,
                                       thread_id=thread)
            return json.dumps({"html": html})

        async def stream() -> AsyncIterator[str]:
            last = last_log = None
            while not await request.is_disconnected():
                body = await run_in_threadpool(latest)
                if body != last:
                    last = body
                    yield f"event: latest\ndata: {body}\n\n"
                shown = await run_in_threadpool(activity)
                if shown != last_log:
                    last_log = shown
                    yield f"event: audit\ndata: {shown}\n\n"
                await asyncio.sleep(poll_s)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"x-accel-buffering": "no"})

    async def diff_page(request: Request) -> Response:
        thread, ns = _thread_args(request)
        a, b = request.query_params.get("a"), request.query_params.get("b")
        if not a or not b:
            raise ValueError("choose two checkpoints (a and b) to compare")
        data = await run_in_threadpool(views.diff_view, saver, thread, a, b, ns)
        return page("diff.html", **data)

    def tiers_now() -> dict[str, Any]:
        if samples.due(time.time()):
            with contextlib.suppress(Exception):
                tiers.sample(saver, samples, health_options)
        return tiers.tiers_data(saver, samples, health_options)

    async def tiers_page(request: Request) -> Response:
        data = await run_in_threadpool(tiers_now)
        return page("tiers.html", plot=tiers.lag_plot(data["lag"]), **data)

    async def memory_page(request: Request) -> Response:
        data = await run_in_threadpool(memory.memory_view, store,
                                       request.query_params.get("ns", ""))
        return page("memory.html", **data)

    async def tiers_events(request: Request) -> Response:
        body_template = env.get_template("_tiers.html")

        async def stream() -> AsyncIterator[str]:
            last = None
            quiet = 0.0
            every = max(poll_s, tiers_poll_s)
            while not await request.is_disconnected():
                data = await run_in_threadpool(tiers_now)
                body = json.dumps({"html": body_template.render(
                    plot=tiers.lag_plot(data["lag"]), **data),
                    "verdict": data["health"]["verdict"]})
                if body != last:
                    last, quiet = body, 0.0
                    yield f"event: tiers\ndata: {body}\n\n"
                elif quiet >= 15:
                    quiet = 0.0
                    yield ": ping\n\n"
                await asyncio.sleep(every)
                quiet += every

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"x-accel-buffering": "no"})

    async def tiers_json(request: Request) -> Response:
        return JSONResponse(render.jsonable(await run_in_threadpool(tiers_now)))

    async def _form(request: Request, what: str) -> dict[str, str]:
        # a browser form (application/x-www-form-urlencoded), parsed without
        # python-multipart, which starlette's request.form() needs
        if not request.headers.get("content-type", "").startswith(
                "application/x-www-form-urlencoded"):
            raise ValueError(f"{what} is posted as a form (application/x-www-form-urlencoded)")
        return dict(parse_qsl((await request.body()).decode("utf-8", "replace"),
                              keep_blank_values=True))

    async def fork(request: Request) -> Response:
        field = await _form(request, "a fork")
        thread, ns = field.get("thread_id", ""), field.get("ns", "")
        cid, to = field.get("checkpoint_id", ""), field.get("to", "").strip()
        command = views.fork_command(thread, cid, ns, to=to or None)
        if not allow_writes:
            return page("error.html", 403, title="writes are off", command=command,
                        message="this dashboard runs read-only: start it with "
                                "--allow-writes (and a token) to fork, or run the command")
        if not security.csrf_ok(token, field.get("csrf", ""), dict(request.headers)):
            return page("error.html", 403, title="refused",
                        message="the form's CSRF check failed: reload the page and retry")
        if not thread or not cid or not to:
            raise ValueError("a fork needs thread_id, checkpoint_id and a new thread_id (to)")
        values: dict[str, Any] = {}
        channel = field.get("channel", "")
        if channel:
            try:
                values[channel] = json.loads(field.get("value", ""))
            except ValueError as exc:
                raise ValueError(f"the value for channel {channel!r} is not JSON: "
                                 f"{exc}") from None
        done = await run_in_threadpool(lookup.fork, saver, saver.sync_clients, thread, cid,
                                       to, ns, values)
        log.info("dashboard: forked a thread at checkpoint %s", done["source_checkpoint_id"])
        return RedirectResponse("thread?" + urlencode({"thread_id": to, "ns": ns}),
                                status_code=303)

    async def act(request: Request) -> Response:
        field = await _form(request, "an action")
        thread = field.get("thread_id", "")
        if not allow_writes:
            return page("error.html", 403, title="writes are off",
                        message="this dashboard runs read-only: start it with "
                                "--allow-writes (and a token) and --graph NAME=MODULE:ATTR "
                                "to act on threads, or run the command line shown on the "
                                "thread's page")
        if not security.csrf_ok(token, field.get("csrf", ""), dict(request.headers)):
            return page("error.html", 403, title="refused",
                        message="the form's CSRF check failed: reload the page and retry")
        try:
            if field.get("action") == "cancel":
                await run_in_threadpool(acts.cancel, thread, field.get("run_id", ""))
            else:
                await run_in_threadpool(acts.act, field)
        except runs.QueueFullError as exc:
            return page("error.html", 503, title="busy", message=str(exc))
        except (runs.ThreadBusyError, actions_mod.ActionError) as exc:
            return page("error.html", 409 if isinstance(exc, runs.ThreadBusyError) else 400,
                        title="refused", message=str(exc))
        log.info("dashboard: %s on a thread", field.get("action"))
        return RedirectResponse("thread?" + urlencode({"thread_id": thread}) + "#actions",
                                status_code=303)

    async def audit_json(request: Request) -> Response:
        thread = request.query_params.get("thread_id") or None
        db, col = saver.sync_clients.db, saver.context.collections.audit
        rows = await run_in_threadpool(audit.entries, db, col, thread, 200)
        return JSONResponse(render.jsonable({"entries": rows}))

    async def sampler() -> None:
        while True:
            with contextlib.suppress(Exception):
                await run_in_threadpool(tiers.sample, saver, samples, health_options)
            await asyncio.sleep(lag_every_s)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        task = asyncio.ensure_future(sampler())
        try:
            yield
        finally:
            task.cancel()
            feed.stop()
            acts.runs.shutdown()

    routes = [
        Route("/", guarded(threads_page)),
        Route("/events/threads", guarded(threads_events)),
        Route("/thread", guarded(thread_page)),
        Route("/events/thread", guarded(thread_events)),
        Route("/diff", guarded(diff_page)),
        Route("/tiers", guarded(tiers_page)),
        Route("/events/tiers", guarded(tiers_events)),
        Route("/memory", guarded(memory_page)),
        Route("/api/threads", guarded(threads_json)),
        Route("/api/thread", guarded(thread_json)),
        Route("/api/thread/{thread_id:path}/size", guarded(thread_size_json)),
        Route("/thread/size", guarded(thread_size_part)),
        Route("/api/tiers", guarded(tiers_json)),
        Route("/api/audit", guarded(audit_json)),
        Route("/fork", guarded(fork), methods=["POST"]),
        Route("/act", guarded(act), methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return GuardMiddleware(Starlette(routes=routes, lifespan=lifespan), token, hosts)


def serve(saver: Any, *, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
          allow_writes: bool = False, allowed_hosts: Iterable[str] = (),
          warn_wildcard: bool = True, **options: Any) -> None:
    """Run the dashboard with uvicorn until interrupted. Raises ``ConfigurationError``
    (before binding anything) for a non-loopback ``host`` without ``token``, or
    ``allow_writes`` without one. The address bound is an allowed host name too
    (``allowed_hosts`` adds others; a wildcard bind, 0.0.0.0 or ::, with none logs a
    warning saying to add them, unless not ``warn_wildcard``: the CLI says it itself).
    Uvicorn's access log is off (URLs may carry the token); ``options`` go to
    ``create_app``."""
    import uvicorn

    security.check_bind(host, token, allow_writes)
    hosts = list(allowed_hosts)
    bound = security.bound_host(host)
    if bound is not None:
        hosts.append(bound)
    elif warn_wildcard and not hosts and not security.is_loopback(host):
        log.warning(wildcard_note(host))
    app = create_app(saver, token=token, allow_writes=allow_writes, allowed_hosts=hosts,
                     **options)
    uvicorn.run(app, host=host, port=port, access_log=False, log_level="warning")


def wildcard_note(host: str) -> str:
    """What to tell someone binding every address (``host`` 0.0.0.0 or ::) with no
    allowed host name: browsers reaching it by another name get 400 until it is added."""
    return (f"dashboard: bound to {host}, it answers only requests for localhost, 127.0.0.1 "
            "and [::1]: add the names or addresses browsers reach it by with --allowed-host "
            "NAME (repeatable; create_app/serve(allowed_hosts=[...]))")


__all__ = ["ConfigurationError", "create_app", "serve", "wildcard_note"]
