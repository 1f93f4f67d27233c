"""Every codec round-trips exactly, through the serializer and both real blob stores."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from langgraph_durable.serde import (
    BlobStore,
    ExternalRefSerializer,
    NumpyCodec,
    PandasCodec,
    UnsupportedValueError,
    parse_refs,
)

from ._frames import ARRAYS, FRAMES, SERIES, UNSUPPORTED_FRAMES


def _exact_frame(expected: pd.DataFrame, actual: Any) -> None:
    assert type(actual) is pd.DataFrame
    pd.testing.assert_frame_equal(
        actual,
        expected,
        check_dtype=True,
        check_index_type=True,
        check_column_type=True,
        check_exact=True,
        check_freq=True,
        check_flags=True,
    )
    assert actual.attrs == expected.attrs


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_dataframe_round_trips_exactly(serde: ExternalRefSerializer, name: str) -> None:
    df = FRAMES[name]()
    typed = serde.dumps_typed(df)
    (ref,) = parse_refs(*typed)
    assert ref["format"] == "pandas.DataFrame/parquet"
    assert ref["key"] == ref["sha256"] + ".parquet"
    _exact_frame(df, serde.loads_typed(typed))


@pytest.mark.parametrize("name", sorted(SERIES))
def test_series_round_trips_exactly(serde: ExternalRefSerializer, name: str) -> None:
    series = SERIES[name]()
    typed = serde.dumps_typed(series)
    assert parse_refs(*typed)[0]["format"] == "pandas.Series/parquet"
    back = serde.loads_typed(typed)
    assert type(back) is pd.Series
    pd.testing.assert_series_equal(back, series, check_exact=True, check_index_type=True)
    assert back.name == series.name and type(back.name) is type(series.name)


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_ndarray_round_trips_exactly(serde: ExternalRefSerializer, name: str) -> None:
    arr = ARRAYS[name]()
    typed = serde.dumps_typed(arr)
    (ref,) = parse_refs(*typed)
    assert (ref["format"], ref["key"][-4:]) == ("numpy.ndarray/npy", ".npy")
    back = serde.loads_typed(typed)
    assert type(back) is np.ndarray
    assert back.dtype == arr.dtype and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)
    assert back.flags.f_contiguous == arr.flags.f_contiguous or arr.ndim < 2


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.array([1, "a", None], dtype=object),
        lambda: np.array([(1, None)], dtype=[("a", "i4"), ("b", "O")]),
    ],
    ids=["object", "structured_with_object"],
)
def test_object_arrays_are_refused_naming_the_dtype(
    local_store: BlobStore, make: Callable[[], np.ndarray]
) -> None:
    arr = make()
    serde = ExternalRefSerializer(store=local_store)
    with pytest.raises(UnsupportedValueError) as info:
        serde.dumps_typed(arr)
    assert isinstance(info.value, ValueError)
    assert info.value.dtype == str(arr.dtype)
    assert str(arr.dtype) in str(info.value) and "pickle" in str(info.value)
    assert list(local_store.list_keys()) == []


@pytest.mark.parametrize("name", sorted(UNSUPPORTED_FRAMES))
def test_frames_parquet_cannot_hold_exactly_are_refused(name: str) -> None:
    make, needle = UNSUPPORTED_FRAMES[name]
    with pytest.raises(UnsupportedValueError, match="(?s)" + needle.replace("(", r"\(")):
        PandasCodec().encode(make())


def test_codecs_claim_exact_types_only() -> None:
    class MyFrame(pd.DataFrame):
        pass

    frame_codec, series_codec, np_codec = PandasCodec(), PandasCodec(series=True), NumpyCodec()
    assert frame_codec.matches(pd.DataFrame()) and not frame_codec.matches(MyFrame())
    assert series_codec.matches(pd.Series([1])) and not series_codec.matches(pd.DataFrame())
    assert np_codec.matches(np.zeros(1)) and not np_codec.matches(np.float64(1.0))
    assert not np_codec.matches(np.ma.masked_array([1]))


def test_same_frame_encodes_to_identical_bytes() -> None:
    make = FRAMES["nullable"]
    assert PandasCodec().encode(make()) == PandasCodec().encode(make())


def test_parquet_blob_is_readable_by_plain_pyarrow(local_store: BlobStore) -> None:
    import io

    import pyarrow.parquet as pq

    df = pd.DataFrame({"price": [1.5, 2.5], "sku": ["a", "b"]})
    serde = ExternalRefSerializer(store=local_store)
    (ref,) = parse_refs(*serde.dumps_typed(df))
    table = pq.read_table(io.BytesIO(local_store.get(ref["key"])))
    assert table.column_names == ["price", "sku"]
