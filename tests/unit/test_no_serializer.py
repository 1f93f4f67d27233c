"""The two places where typing the inner layers named a missing serializer or cipher: a
context with no serializer (the runtime's own, a flusher's) and an encrypting serializer
that shows no cipher. Both raise ``ConfigurationError`` instead of failing on ``None`` or
``False``; no servers."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.config import DurableConfig
from langgraph_durable.core.items import items_for
from langgraph_durable.errors import ConfigurationError
from langgraph_durable.plans.context import NO_SERIALIZER, Context


class _SaysItEncrypts(JsonPlusSerializer):
    """A serializer that says it encrypts and holds no cipher."""

    encrypted = True


def test_a_context_without_a_serializer_refuses_to_dump_or_load_a_value() -> None:
    ctx = Context(DurableConfig(), serde=NO_SERIALIZER, queryable=True)
    with pytest.raises(ConfigurationError, match="has no serializer"):
        ctx.serde.dumps_typed({"a": 1})
    with pytest.raises(ConfigurationError, match="has no serializer"):
        ctx.serde.loads_typed(("msgpack", b"\x80"))


def test_an_encrypting_serializer_without_a_cipher_refuses_to_digest_an_encrypted_item(
) -> None:
    items = items_for(_SaysItEncrypts(), digest_key="k" * 16)
    assert items.enabled is True
    with pytest.raises(ConfigurationError, match="shows no cipher"):
        items.digest(("msgpack+aes", b"\x00" * 8))
    assert len(items.digest(("msgpack", b"\x80"))) == 16  # a plain item needs no cipher
