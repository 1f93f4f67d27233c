"""The effect journal in the CLI: ``show`` lists the effects of the tasks run from the
checkpoint; ``export``/``import`` carry them, so an imported thread resumes without
repeating an effect."""

from __future__ import annotations

import json
from pathlib import Path

import redis
from langgraph.types import Command

from langgraph_durable import journaled
from langgraph_durable.hot.effect_scripts import TRUST_FIELD
from langgraph_durable.testing import mongo_server

from ..effects_support import pay_then_approve, service
from ..model_journal_support import Counting, ask_twice_then_approve
from .clikit import Cli


def test_show_lists_the_effects_and_export_import_carries_them(cli: Cli,
                                                               tmp_path: Path) -> None:
    config = {"configurable": {"thread_id": "fx"}}
    with service() as svc:
        with cli.saver() as saver:
            pay_then_approve(saver).invoke({"url": svc.url, "amount": 12}, config)
        shown = cli.json("show", "fx")
        assert [(e["name"], e["call"], e["state"], e["result"]) for e in shown["effects"]] == [
            ("pay", 0, "done", {"id": "ch_1", "amount": 12})]
        assert "effects of the tasks run from this checkpoint" in cli("show", "fx").stdout

        path = tmp_path / "fx.jsonl"
        cli("export", "fx", "--output", str(path))
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        assert lines[0]["format_version"] == 4 and lines[0]["counts"]["effect"] == 1
        assert [(r["name"], r["n"]) for r in lines[1:] if r["type"] == "effect"] == [("pay", 0)]

        cli("import", str(path), "--thread", "fx2")
        def untiered(effects: list[dict]) -> list[dict]:
            return [{k: v for k, v in e.items() if k != "tier"} for e in effects]

        imported = cli.json("show", "fx2")["effects"]
        assert untiered(imported) == untiered(shown["effects"])
        assert [e["tier"] for e in imported] == ["durable"]  # MongoDB only, Redis has none
        with cli.saver() as saver:
            done = pay_then_approve(saver).invoke(
                Command(resume=True), {"configurable": {"thread_id": "fx2"}})
        assert svc.calls == 1
        assert done["receipt"] == {"id": "ch_1", "amount": 12}


def test_show_lists_the_effects_redis_holds_while_mongodb_is_down(redis_url: str) -> None:
    config = {"configurable": {"thread_id": "fx"}}
    with service() as svc, mongo_server() as ms:
        cli = Cli(redis_url, ms.url)
        cli.env["LGD_SERVER_SELECTION_TIMEOUT_S"] = "0.5"
        with cli.saver() as saver:
            pay_then_approve(saver).invoke({"url": svc.url, "amount": 12}, config)
            fx_key = saver.context.keys("fx").fx
        ms.stop()
        shown = cli.json("show", "fx")  # the thread began in Redis: its journal is all there
        assert [(e["name"], e["state"], e["tier"]) for e in shown["effects"]] == [
            ("pay", "done", "hot")]
        assert "effects_note" not in shown
        redis.Redis.from_url(redis_url).hdel(fx_key, TRUST_FIELD)  # Redis cannot vouch now
        shown = cli.json("show", "fx")
        assert [(e["name"], e["state"], e["tier"]) for e in shown["effects"]] == [
            ("pay", "done", "hot")]
        assert shown["effects_note"].startswith(
            "effects: the entries Redis holds; durable tier (MongoDB) did not answer")
        ms.start()


def test_show_marks_journaled_model_calls_with_model_tokens_and_answer(cli: Cli) -> None:
    """Two journaled calls then ``interrupt()``: ``show`` lists them as model calls (model,
    call number, tokens, a preview of the answer), not as the journal's raw record."""
    config = {"configurable": {"thread_id": "mj"}}
    with cli.saver() as saver:
        model = journaled(Counting(key="cli-show"))
        ask_twice_then_approve(saver, model).invoke({"prompt": "q"}, config)
    effects = cli.json("show", "mj")["effects"]
    assert [(e["kind"], e["name"], e["call"], e["state"], e["result"]) for e in effects] == [
        ("model_call", "model:Counting", 0, "done", None),
        ("model_call", "model:Counting", 1, "done", None)]
    summary = effects[1]["model_call"]
    assert summary["model"] == "Counting" and summary["answered"] is True
    assert summary["tokens"] == {"input": 10, "output": 5, "total": 15}
    assert summary["answer"] == "answer-2" and summary["tool_calls"] == []
    assert len(summary["digest"]) == 64 and summary["note"].startswith("journaled: ")
    text = cli("show", "mj").stdout
    assert "[model call] Counting" in text and "answer-2" in text
    assert "a re-execution of this task returns this answer without calling the model" in text
    assert '"digest"' not in text and "kinds" not in text
