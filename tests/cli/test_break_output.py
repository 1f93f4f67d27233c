"""`threads` and `retention` output: thread ids and message text print as text:
a first message ``[/] ...`` (rich markup a user can type) once made ``threads --page``
fail for every thread with ``MarkupError``, and ``[x]`` vanished from titles; options
``threads`` would ignore (``--attention`` with ``--status``, filters with
``--rebuild-summary``, ``--after`` alone) are refused."""

from __future__ import annotations

import json

from langchain_core.messages import HumanMessage

from .clikit import Cli, build_graph, first_input

POLICY = {"strategy": "delete", "default_ttl": 60, "sweep_interval_minutes": 60}


def test_titles_and_thread_ids_that_look_like_markup_print_as_they_are(cli: Cli) -> None:
    with cli.saver(ttl=POLICY) as saver:
        graph = build_graph(saver)
        for tid, text in (("m[/]", "[/] closing"), ("plain", "a+b=c? [x] [red]hi")):
            graph.invoke({**first_input(), "messages": [HumanMessage(text, id="h-0")]},
                         {"configurable": {"thread_id": tid}})
        saver.flush()
    for args in (("threads", "--page", "1"), ("threads", "--search", "closing"),
                 ("threads",)):
        out = cli(*args).stdout
        assert "m[/]" in out, args
    page = cli("threads", "--page", "1").stdout
    assert "[/] closing" in page and "a+b=c? [x] [red]hi" in page
    cli.env["LGD_TTL"] = json.dumps(POLICY)
    assert "m[/]" in cli("retention").stdout


def test_threads_refuses_options_it_would_ignore(cli: Cli) -> None:
    for args, said in (
            (("--attention", "--status", "done"), "give it or --status, not both"),
            (("--rebuild-summary", "--page", "2"), "give it without --page"),
            (("--rebuild-summary", "--search", "x", "--where", "a=1"),
             "give it without --search, --where"),
            (("--after", "t1"), "--after resumes --rebuild-summary")):
        result = cli("threads", *args, code=1)
        assert said in result.output, (args, result.output)
