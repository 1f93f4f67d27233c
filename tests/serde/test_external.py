"""ExternalRefSerializer: references, nesting, thresholds, dedup, integrity, encryption."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
import ormsgpack
import pandas as pd
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.serde import (
    EXTREF_TYPE,
    BlobIntegrityError,
    BlobNotFoundError,
    BlobStore,
    ExternalRefError,
    ExternalRefSerializer,
    LocalBlobStore,
    S3BlobStore,
    collect_refs,
    parse_refs,
    refs_in,
)

from ._helpers import blob_count, bucket_objects, corrupt, encrypted_inner


@dataclasses.dataclass
class Point:
    """A user type that strict msgpack only revives when allowlisted."""

    x: int
    y: int


def frame(n: int = 1000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"a": np.arange(n), "b": rng.random(n), "c": [f"s{i % 7}" for i in range(n)]}
    )


def test_is_a_serializer_protocol(serde: ExternalRefSerializer) -> None:
    assert isinstance(serde, SerializerProtocol)


def test_small_values_are_stored_exactly_like_the_inner(serde: ExternalRefSerializer) -> None:
    inner = JsonPlusSerializer()
    for value in [None, 1, "x", b"raw", {"a": [1, 2.5, "s"]}, Point(1, 2)]:
        typed = serde.dumps_typed(value)
        assert typed == inner.dumps_typed(value)
        assert refs_in(*typed) == set()
    assert blob_count(serde.store) == 0
    assert serde.loads_typed(inner.dumps_typed({"k": [1]})) == {"k": [1]}


def test_a_dataframe_is_stored_as_a_small_reference(serde: ExternalRefSerializer) -> None:
    df = frame(50_000)
    type_, data = serde.dumps_typed(df)
    assert type_ == EXTREF_TYPE and len(data) < 400
    envelope = ormsgpack.unpackb(data)
    (ref,) = envelope["parts"]
    assert {"store", "key", "sha256", "format", "size"} <= set(ref)
    assert ref["store"] == serde.store.name and ref["path"] == []
    blob = serde.store.get(ref["key"])
    assert hashlib.sha256(blob).hexdigest() == ref["sha256"] and len(blob) == ref["size"]
    pd.testing.assert_frame_equal(serde.loads_typed((type_, data)), df, check_exact=True)


def test_values_inside_dicts_lists_and_tuples(serde: ExternalRefSerializer) -> None:
    df, s, arr = frame(10), pd.Series([1.5, 2.5], name="s"), np.arange(6).reshape(2, 3)
    state = {
        "df": df,
        "meta": {"arr": arr, "items": [1, df, ("tag", s)], "n": None},
        7: arr,
        "plain": [1, "two"],
    }
    typed = serde.dumps_typed(state)
    assert state["meta"]["items"][1] is df  # the caller's containers are not mutated
    refs = parse_refs(*typed)
    assert sorted(map(str, (r["path"] for r in refs))) == sorted(
        map(str, [["df"], ["meta", "arr"], ["meta", "items", 1], ["meta", "items", 2, 1], [7]])
    )
    assert len(refs_in(*typed)) == 3  # df twice and arr twice are one blob each
    back = serde.loads_typed(typed)
    pd.testing.assert_frame_equal(back["df"], df)
    pd.testing.assert_frame_equal(back["meta"]["items"][1], df)
    np.testing.assert_array_equal(back["meta"]["arr"], arr)
    np.testing.assert_array_equal(back[7], arr)
    tag, series = back["meta"]["items"][2]  # tuples come back as the inner returns them (list)
    assert tag == "tag"
    pd.testing.assert_series_equal(series, s)
    assert back["plain"] == [1, "two"] and back["meta"]["n"] is None


def test_max_depth_limits_the_search(local_store: LocalBlobStore) -> None:
    shallow = ExternalRefSerializer(store=local_store, max_depth=1)
    assert refs_in(*shallow.dumps_typed({"df": frame(3)}))
    with pytest.raises(TypeError, match="DataFrame"):  # left to the inner, which cannot
        shallow.dumps_typed({"deep": {"df": frame(3)}})


def test_large_values_become_raw_blobs(store: BlobStore) -> None:
    serde = ExternalRefSerializer(store=store, threshold_bytes=1000)
    big = {"messages": [f"message {i}" for i in range(500)]}
    typed = serde.dumps_typed(big)
    (ref,) = parse_refs(*typed)
    assert (typed[0], ref["format"], ref["inner"]) == (EXTREF_TYPE, "raw", "msgpack")
    assert ref["size"] > 1000 and len(typed[1]) < 400
    assert serde.loads_typed(typed) == big
    blob = b"\x00" * 5000
    assert serde.loads_typed(serde.dumps_typed(blob)) == blob
    assert serde.dumps_typed({"small": 1})[0] == "msgpack"
    never = ExternalRefSerializer(store=store, threshold_bytes=None)
    assert never.dumps_typed(big)[0] == "msgpack"


def test_raw_body_and_codec_parts_together(store: BlobStore) -> None:
    serde = ExternalRefSerializer(store=store, threshold_bytes=100)
    state = {"df": frame(5), "log": ["line"] * 100}
    refs = parse_refs(*serde.dumps_typed(state))
    assert [r["format"] for r in refs] == ["raw", "pandas.DataFrame/parquet"]
    back = serde.loads_typed(serde.dumps_typed(state))
    assert back["log"] == state["log"]
    pd.testing.assert_frame_equal(back["df"], state["df"])


def test_same_frame_is_uploaded_once(s3_store: S3BlobStore, s3_client: Any, bucket: str) -> None:
    first, second = ExternalRefSerializer(store=s3_store), ExternalRefSerializer(store=s3_store)
    typed = [first.dumps_typed(frame(20_000)) for _ in range(3)]
    typed += [second.dumps_typed({"thread": i, "df": frame(20_000)}) for i in range(3)]
    assert len(collect_refs(typed)) == 1
    assert len(bucket_objects(s3_client, bucket)) == 1
    first.dumps_typed(frame(20_000, seed=1))
    assert len(bucket_objects(s3_client, bucket)) == 2


def test_same_frame_is_stored_once_locally(local_store: LocalBlobStore) -> None:
    serde = ExternalRefSerializer(store=local_store)
    for _ in range(5):
        serde.dumps_typed(frame())
    assert len([p for p in local_store.root.rglob("*") if p.is_file()]) == 1


def test_corrupt_blob_raises_integrity_error_naming_the_key(serde: ExternalRefSerializer) -> None:
    typed = serde.dumps_typed(frame())
    (ref,) = parse_refs(*typed)
    corrupt(serde.store, ref["key"], b"PAR1 not the same bytes")
    with pytest.raises(BlobIntegrityError) as info:
        serde.loads_typed(typed)
    err = info.value
    assert err.key == ref["key"] and err.expected == ref["sha256"] and err.actual != err.expected
    assert ref["key"] in str(err) and serde.store.name in str(err)
    err.add_context(thread_id="t-1", channel="df")
    assert "thread_id='t-1'" in str(err) and "channel='df'" in str(err)


def test_missing_blob_raises_not_found_naming_the_key(serde: ExternalRefSerializer) -> None:
    typed = serde.dumps_typed({"x": frame()})
    (key,) = refs_in(*typed)
    serde.store.delete(key)
    with pytest.raises(BlobNotFoundError) as info:
        serde.loads_typed(typed)
    assert info.value.key == key and key in str(info.value)
    assert isinstance(info.value, LookupError)


def test_unknown_format_and_corrupt_envelope(local_store: LocalBlobStore) -> None:
    serde = ExternalRefSerializer(store=local_store)
    typed = serde.dumps_typed(frame())
    numpy_only = ExternalRefSerializer(store=local_store, codecs=[serde.codecs[2]])
    with pytest.raises(ExternalRefError, match="pandas.DataFrame/parquet"):
        numpy_only.loads_typed(typed)
    with pytest.raises(ExternalRefError, match="corrupt"):
        serde.loads_typed((EXTREF_TYPE, b"\xc1"))
    with pytest.raises(ExternalRefError, match="corrupt"):
        refs_in(EXTREF_TYPE, b"\xc1")


def test_encrypted_inner_encrypts_blobs_and_body(store: BlobStore) -> None:
    serde = ExternalRefSerializer(inner=encrypted_inner(), store=store, threshold_bytes=2000)
    assert serde.encrypted
    df = frame()
    typed = serde.dumps_typed({"df": df, "note": "secret"})
    envelope = ormsgpack.unpackb(typed[1])
    assert envelope["body"][0] == "msgpack+aesgcm" and b"secret" not in envelope["body"][1]
    (ref,) = envelope["parts"]
    assert ref["enc"] == "aesgcm" and ref["key"].endswith(".parquet.aesgcm")
    stored = store.get(ref["key"])
    assert not stored.startswith(b"PAR1") and hashlib.sha256(stored).hexdigest() != ref["sha256"]
    pd.testing.assert_frame_equal(serde.loads_typed(typed)["df"], df)
    # dedup works although every encryption differs
    again = serde.dumps_typed(df)
    assert refs_in(*again) == {ref["key"]} and blob_count(store) == 1
    # small values are exactly what the EncryptedSerializer writes
    assert serde.dumps_typed({"a": 1})[0] == "msgpack+aesgcm"
    assert serde.loads_typed(serde.inner.dumps_typed({"a": 1})) == {"a": 1}
    # raw blobs are encrypted too
    big = ["secret payload"] * 500
    (raw,) = parse_refs(*serde.dumps_typed(big))
    assert raw["format"] == "raw" and b"secret payload" not in store.get(raw["key"])
    assert serde.loads_typed(serde.dumps_typed(big)) == big


def test_encrypted_blob_needs_the_right_key(store: BlobStore) -> None:
    serde = ExternalRefSerializer(inner=encrypted_inner(), store=store)
    typed = serde.dumps_typed(frame())
    (ref,) = parse_refs(*typed)
    other_key = ExternalRefSerializer(inner=encrypted_inner(b"2" * 16), store=store)
    with pytest.raises(BlobIntegrityError, match="decrypted") as info:
        other_key.loads_typed(typed)
    assert info.value.key == ref["key"]
    with pytest.raises(ExternalRefError, match="no cipher"):
        ExternalRefSerializer(store=store).loads_typed(typed)
    tampered = bytearray(store.get(ref["key"]))
    tampered[-1] ^= 1
    corrupt(store, ref["key"], bytes(tampered))
    with pytest.raises(BlobIntegrityError):
        serde.loads_typed(typed)


def test_pycryptodome_encrypted_serializer(local_store: LocalBlobStore) -> None:
    inner = EncryptedSerializer.from_pycryptodome_aes(key=b"1" * 16)
    serde = ExternalRefSerializer(inner=inner, store=local_store)
    pd.testing.assert_frame_equal(serde.loads_typed(serde.dumps_typed(frame())), frame())


@pytest.mark.parametrize("threshold", [256_000, 0], ids=["inline_body", "raw_body"])
def test_msgpack_allowlist_applies_to_inline_and_blob_values(
    local_store: LocalBlobStore, threshold: int
) -> None:
    strict = ExternalRefSerializer(
        inner=JsonPlusSerializer(allowed_msgpack_modules=None),
        store=local_store,
        threshold_bytes=threshold,
    )
    typed = strict.dumps_typed({"p": Point(1, 2), "df": frame(3)})
    assert strict.loads_typed(typed)["p"] == {"x": 1, "y": 2}  # blocked: not revived
    allowed = strict.with_msgpack_allowlist([Point])
    assert isinstance(allowed, ExternalRefSerializer) and allowed is not strict
    assert allowed.store is strict.store and allowed.threshold_bytes == threshold
    back = allowed.loads_typed(typed)
    assert back["p"] == Point(1, 2)
    pd.testing.assert_frame_equal(back["df"], frame(3))
    assert allowed.with_msgpack_allowlist([Point]) is allowed


def test_allowlist_through_checkpoint_saver(local_store: LocalBlobStore, caplog: Any) -> None:
    permissive = ExternalRefSerializer(store=local_store)
    assert permissive.with_msgpack_allowlist([Point]) is permissive  # allow-all stays as is
    strict = ExternalRefSerializer(
        inner=JsonPlusSerializer(allowed_msgpack_modules=None), store=local_store
    )
    saver = InMemorySaver(serde=strict)
    with caplog.at_level(logging.WARNING):
        clone = saver.with_allowlist({(Point.__module__, "Point")})
    assert "does not support msgpack allowlist" not in caplog.text
    assert clone is not saver and isinstance(clone.serde, ExternalRefSerializer)
    assert clone.serde.loads_typed(strict.dumps_typed(Point(3, 4))) == Point(3, 4)


def test_allowlist_with_encrypted_inner(local_store: LocalBlobStore) -> None:
    inner = EncryptedSerializer(
        encrypted_inner().cipher, JsonPlusSerializer(allowed_msgpack_modules=None)
    )
    serde = ExternalRefSerializer(inner=inner, store=local_store, threshold_bytes=0)
    typed = serde.dumps_typed([Point(5, 6)])
    updated = serde.with_msgpack_allowlist([Point])
    assert isinstance(updated.inner, EncryptedSerializer)
    assert updated.inner.cipher is inner.cipher
    assert updated.loads_typed(typed) == [Point(5, 6)]


def test_default_store_is_a_local_folder(_default_blob_dir: Path) -> None:
    serde = ExternalRefSerializer()
    assert isinstance(serde.store, LocalBlobStore) and serde.store.root == _default_blob_dir
    assert not _default_blob_dir.exists()  # created on first write only
    serde.dumps_typed(frame(3))
    assert blob_count(serde.store) == 1


def test_invalid_arguments(local_store: LocalBlobStore) -> None:
    with pytest.raises(ValueError):
        ExternalRefSerializer(store=local_store, threshold_bytes=-1)
    with pytest.raises(ExternalRefError):
        ExternalRefSerializer(store=object())  # type: ignore[arg-type]


async def test_async_paths_run_in_worker_threads(store: BlobStore) -> None:
    threads: set[int] = set()
    original = store.put_if_absent

    def recording_put(key: str, data: bytes) -> bool:
        threads.add(threading.get_ident())
        return original(key, data)

    store.put_if_absent = recording_put  # type: ignore[method-assign]
    serde = ExternalRefSerializer(store=store)
    typed = await serde.adumps_typed({"df": frame()})
    pd.testing.assert_frame_equal((await serde.aloads_typed(typed))["df"], frame())
    assert threads and threading.get_ident() not in threads
