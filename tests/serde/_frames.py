"""Catalogues of pandas / NumPy values that must round-trip exactly, and ones to refuse."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd


def _object_missing() -> pd.DataFrame:
    df = pd.DataFrame({"o": ["a", "b", "c", "d"], "m": ["x", "y", "z", "w"]}).astype(object)
    df.loc[1, "o"] = None
    df.loc[3, "o"] = np.nan
    df.loc[1, "m"] = None
    df.loc[2, "m"] = pd.NA
    return df


def _with_attrs() -> pd.DataFrame:
    df = pd.DataFrame({"a": [1, 2]})
    df.attrs["unit"] = "m"
    return df


FRAMES: dict[str, Callable[[], pd.DataFrame]] = {
    "basic": lambda: pd.DataFrame({"a": [1, 2, 3], "b": [1.0, 2.5, None], "c": ["x", "y", None]}),
    "named_index": lambda: pd.DataFrame({"a": [1, 2]}, index=pd.Index([10, 20], name="id")),
    "string_index": lambda: pd.DataFrame({"a": [1, 2]}, index=["p", "q"]),
    "object_index": lambda: pd.DataFrame(
        {"a": [1, 2]}, index=pd.Index(["p", "q"], dtype=object, name="o")
    ),
    "int_index_name": lambda: pd.DataFrame({"a": [1]}, index=pd.Index([5], name=3)),
    "range_index_step": lambda: pd.DataFrame({"a": [1, 2]}, index=pd.RangeIndex(5, 9, 2, name="r")),
    "reversed_range": lambda: pd.DataFrame({"a": [1, 2]}, index=pd.RangeIndex(2)[::-1]),
    "multiindex": lambda: pd.DataFrame(
        {"v": [1, 2, 3]},
        index=pd.MultiIndex.from_tuples([("a", 1), ("a", 2), ("b", 1)], names=["k", "n"]),
    ),
    "multiindex_dt_cat": lambda: pd.DataFrame(
        {"v": [1, 2]},
        index=pd.MultiIndex.from_arrays(
            [pd.date_range("2024", periods=2, tz="UTC"), pd.Categorical(["a", "b"])],
            names=["t", "c"],
        ),
    ),
    "multiindex_columns": lambda: pd.DataFrame(
        [[1, 2], [3, 4]],
        columns=pd.MultiIndex.from_tuples([("x", "a"), ("x", "b")], names=["l0", "l1"]),
    ),
    "categorical": lambda: pd.DataFrame(
        {"c": pd.Categorical(["a", "b", "a"], categories=["b", "a", "z"], ordered=True)}
    ),
    "categorical_index": lambda: pd.DataFrame(
        {"a": [1, 2]}, index=pd.CategoricalIndex(["x", "y"], name="ci")
    ),
    "tz_aware": lambda: pd.DataFrame(
        {"t": pd.date_range("2024-01-01", periods=3, tz="Europe/Paris")}
    ),
    "tz_index_with_freq": lambda: pd.DataFrame(
        {"a": [1, 2, 3]}, index=pd.date_range("2024-01-01", periods=3, tz="UTC", name="ts")
    ),
    "timedelta_index_freq": lambda: pd.DataFrame(
        {"a": [1, 2]}, index=pd.timedelta_range("1s", periods=2, freq="s")
    ),
    "datetime_units": lambda: pd.DataFrame(
        {
            "s": pd.to_datetime(["2020-01-01", "2021-01-01"]).as_unit("s"),
            "ms": pd.to_datetime(["2020-01-01", None]).as_unit("ms"),
            "us": pd.to_datetime(["2020-01-01", "2021-01-01"]).as_unit("us"),
            "ns": pd.to_datetime(["2020-01-01", None]),
            "td": pd.to_timedelta([1, 2], unit="s"),
        }
    ),
    "nullable": lambda: pd.DataFrame(
        {
            "i": pd.array([1, None, 3], dtype="Int64"),
            "b": pd.array([True, None, False], dtype="boolean"),
            "s": pd.array(["a", None, "c"], dtype="string"),
            "f": pd.array([1.5, None, 2], dtype="Float32"),
            "u8": pd.array([1, 2, None], dtype="UInt8"),
            "pa": pd.array([1, None, 3], dtype="int64[pyarrow]"),
            "spa": pd.array(["a", None, "c"], dtype="string[pyarrow]"),
        }
    ),
    "numeric_widths": lambda: pd.DataFrame(
        {
            "u64": np.array([2**63 + 1], dtype=np.uint64),
            "i8": np.array([-3], dtype=np.int8),
            "f16": np.array([1.5], dtype=np.float16),
            "f32": np.array([0.1], dtype=np.float32),
            "bool": [True],
        }
    ),
    "period_interval": lambda: pd.DataFrame(
        {"p": pd.period_range("2020-01", periods=2, freq="M"), "i": pd.interval_range(0, 2)}
    ),
    "object_strings_and_missing": _object_missing,
    "object_bytes_decimal": lambda: pd.DataFrame(
        {"b": [b"x", None], "d": [Decimal("1.5"), None]}
    ).astype(object),
    "empty": pd.DataFrame,
    "empty_with_columns": lambda: pd.DataFrame(columns=["a", "b"]),
    "empty_typed": lambda: pd.DataFrame({"a": [1], "b": ["x"], "t": pd.to_datetime(["2020"])}).iloc[
        :0
    ],
    "empty_categorical": lambda: pd.DataFrame(
        {"c": pd.Categorical([], categories=["x", "y"], ordered=True)},
        index=pd.CategoricalIndex([], categories=[1, 2], name="k"),
    ),
    "int_columns": lambda: pd.DataFrame({0: [1], 1: [2]}),
    "mixed_bool_tuple_none_columns": lambda: pd.DataFrame(
        [[1, 2, 3, 4]], columns=pd.Index(["a", 1, ("t", 2), None], dtype=object)
    ),
    "bool_columns": lambda: pd.DataFrame([[1, 2]], columns=[True, False]),
    "datetime_columns": lambda: pd.DataFrame([[1, 2]], columns=pd.date_range("2024", periods=2)),
    "duplicate_columns": lambda: pd.DataFrame([[1, 2]], columns=["a", "a"]),
    "columns_axis_name": lambda: pd.DataFrame({"a": [1]}).rename_axis(columns="cols"),
    "index_name_equals_column": lambda: pd.DataFrame({"a": [1]}, index=pd.Index([5], name="a")),
    "attrs": _with_attrs,
}

SERIES: dict[str, Callable[[], pd.Series]] = {
    "unnamed": lambda: pd.Series([1, 2]),
    "named": lambda: pd.Series([1.0, None], name="x"),
    "int_name": lambda: pd.Series([1], name=0),
    "tuple_name_categorical": lambda: pd.Series(
        pd.Categorical(["a"]), name=("a", 1), index=pd.Index(["k"], name="i")
    ),
    "tz_datetime_multiindex": lambda: pd.Series(
        pd.date_range("2024", periods=2, tz="Asia/Tokyo"),
        index=pd.MultiIndex.from_tuples([(1, "a"), (2, "b")]),
        name="when",
    ),
    "empty_nullable": lambda: pd.Series([], dtype="Int64", name="e"),
}

ARRAYS: dict[str, Callable[[], np.ndarray]] = {
    "int32": lambda: np.arange(10, dtype=np.int32),
    "float64_2d_fortran": lambda: np.asfortranarray(np.random.default_rng(0).random((4, 3))),
    "big_endian": lambda: np.arange(5, dtype=">i4"),
    "zero_dim": lambda: np.array(3.5),
    "empty_2d": lambda: np.empty((0, 3), dtype=np.float32),
    "bool": lambda: np.array([True, False]),
    "complex": lambda: np.array([1 + 2j, 3 - 1j]),
    "datetime64_ms": lambda: np.array(["2024-01-01", "NaT"], dtype="datetime64[ms]"),
    "timedelta64": lambda: np.array([1, 2], dtype="timedelta64[s]"),
    "unicode": lambda: np.array(["héllo", "x"], dtype="<U5"),
    "bytes": lambda: np.array([b"ab", b"c"], dtype="S2"),
    "structured": lambda: np.array([(1, 2.5), (3, 4.0)], dtype=[("a", "i4"), ("b", "f8")]),
    "non_contiguous": lambda: np.arange(20, dtype=np.int64)[::3],
    "float16_3d_nan": lambda: np.full((2, 2, 2), np.nan, dtype=np.float16),
}

UNSUPPORTED_FRAMES: dict[str, tuple[Callable[[], Any], str]] = {
    "complex_column": (lambda: pd.DataFrame({"c": np.array([1 + 2j])}), "complex"),
    "list_objects": (lambda: pd.DataFrame({"l": [[1, 2], [3]]}), "'l'"),
    "mixed_objects": (lambda: pd.DataFrame({"m": [1, "a"]}).astype(object), "Parquet"),
    "sparse": (lambda: pd.DataFrame({"s": pd.arrays.SparseArray([0, 0, 1])}), "Sparse"),
    "object_label": (lambda: pd.DataFrame({object(): [1]}), "label"),
}
