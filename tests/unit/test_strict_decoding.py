"""The tools' strict decoding (``inspection.strict``) without servers: LangGraph's and
LangChain's types decode as LangGraph's own serializer decodes them; any other named type
becomes a placeholder without its module being imported; the serializer's structure
(cipher, blob store) is kept; which serializers revive any constructor."""

from __future__ import annotations

import collections
import datetime
import sys
import uuid
from pathlib import Path

import numpy as np
import ormsgpack
import pydantic
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Command, Interrupt, Send

from langgraph_durable.inspection.strict import NotDecoded, parse_type, strict_serde
from langgraph_durable.inspection.tolerant import TolerantSerde
from langgraph_durable.runtime.startup import revives_any_constructor
from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore

KEY = b"0123456789abcdef"


class Order(pydantic.BaseModel):
    """An application's own model."""

    item: str
    qty: int


class Strict(pydantic.BaseModel):
    """A model whose stored fields no longer validate nor construct."""

    model_config = pydantic.ConfigDict(extra="forbid")
    n: int


def entry(code: int, module: str, name: str, arg: object) -> tuple[str, bytes]:
    """A stored msgpack value that is one extension entry ``(module, name, arg)``."""
    return "msgpack", ormsgpack.packb(ormsgpack.Ext(code, ormsgpack.packb((module, name, arg))))


def test_langgraph_and_langchain_types_decode_as_langgraph_decodes_them() -> None:
    value = {
        "messages": [HumanMessage("hi", id="h"), AIMessage("", id="a", tool_calls=[
            {"name": "lookup", "args": {"city": "Oslo"}, "id": "c1", "type": "tool_call"}])],
        "send": Send("node", {"x": 1}), "interrupt": Interrupt(value={"q": 1}, id="i1"),
        "command": Command(goto="next", update={"k": 2}),
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
        "id": uuid.UUID(int=7), "tags": {"a", "b"}, "window": collections.deque([1, 2]),
        "path": Path("/tmp/x"),
    }
    typed = JsonPlusSerializer().dumps_typed(value)
    assert strict_serde(None).loads_typed(typed) == JsonPlusSerializer().loads_typed(typed)
    array = strict_serde(None).loads_typed(JsonPlusSerializer().dumps_typed(np.arange(4)))
    assert array.tolist() == [0, 1, 2, 3]


def test_a_type_outside_the_allowlist_is_a_placeholder_and_its_module_is_never_imported(
        ) -> None:
    assert "this" not in sys.modules  # importing it prints the Zen of Python
    got = strict_serde(None).loads_typed(entry(0, "this", "s", "x"))
    assert got == NotDecoded("this.s", "not in the allowlist")
    assert repr(got) == "<not decoded: this.s (not in the allowlist)>"
    assert "this" not in sys.modules
    nested = strict_serde(None).loads_typed(
        JsonPlusSerializer().dumps_typed({"orders": [Order(item="tea", qty=2)]}))
    name = f"{__name__}.Order"
    assert nested == {"orders": [NotDecoded(name, "not in the allowlist")]}
    method = strict_serde(None).loads_typed(
        ("msgpack", ormsgpack.packb(ormsgpack.Ext(3, ormsgpack.packb(
            ("os", "system", "true", "__call__"))))))
    assert method == NotDecoded("os.system.__call__", "method not in the allowlist")
    unknown = strict_serde(None).loads_typed(("msgpack", ormsgpack.packb(ormsgpack.Ext(42, b""))))
    assert unknown == NotDecoded("msgpack extension 42", "unknown extension type")


def test_named_types_decode_and_one_that_fails_to_build_is_a_placeholder() -> None:
    typed = JsonPlusSerializer().dumps_typed(Order(item="tea", qty=2))
    for allow in ([f"{__name__}.Order"], [f"{__name__}:Order"], [Order],
                  [(__name__, "Order")]):
        assert strict_serde(None, allow).loads_typed(typed) == Order(item="tea", qty=2)
    own = JsonPlusSerializer(allowed_msgpack_modules=[Order])  # the app's own allowlist
    assert strict_serde(own).loads_typed(typed) == Order(item="tea", qty=2)
    broken = entry(0, __name__, "Strict", "not a dict")
    assert strict_serde(None, [Strict]).loads_typed(broken) == NotDecoded(
        f"{__name__}.Strict", "failed: TypeError")
    for bad in ("os", "os.", "a b.C", ".x"):
        try:
            parse_type(bad)
        except ValueError as exc:
            assert "module.Class" in str(exc)
        else:
            raise AssertionError(bad)


def test_strict_serde_keeps_the_cipher_and_the_blob_store(tmp_path: Path) -> None:
    app = ExternalRefSerializer(EncryptedSerializer.from_pycryptodome_aes(key=KEY),
                                store=LocalBlobStore(tmp_path))
    typed = app.dumps_typed({"m": [HumanMessage("hi", id="h")], "o": Order(item="x", qty=1)})
    tools = strict_serde(TolerantSerde(app))
    assert isinstance(tools, TolerantSerde) and tools.encrypted and tools.store is app.store
    got = tools.loads_typed(typed)
    assert got == {"m": [HumanMessage("hi", id="h")],
                   "o": NotDecoded(f"{__name__}.Order", "not in the allowlist")}
    assert isinstance(tools.inner.inner, EncryptedSerializer)
    assert tools.inner.inner.cipher is app.inner.cipher  # type: ignore[attr-defined]
    assert app.loads_typed(typed)["o"] == Order(item="x", qty=1)  # the app's is unchanged


def test_which_serializers_revive_any_constructor() -> None:
    strict = JsonPlusSerializer(allowed_msgpack_modules=[Order])
    assert revives_any_constructor(JsonPlusSerializer())
    assert revives_any_constructor(EncryptedSerializer.from_pycryptodome_aes(key=KEY))
    assert revives_any_constructor(ExternalRefSerializer(store=LocalBlobStore("unused")))
    assert revives_any_constructor(JsonPlusSerializer(allowed_msgpack_modules=[Order],
                                                      pickle_fallback=True))
    assert not revives_any_constructor(strict)
    assert not revives_any_constructor(JsonPlusSerializer(allowed_msgpack_modules=None))
    assert not revives_any_constructor(EncryptedSerializer.from_pycryptodome_aes(
        serde=strict, key=KEY))
    assert not revives_any_constructor(strict_serde(None))
    assert not revives_any_constructor(object())
