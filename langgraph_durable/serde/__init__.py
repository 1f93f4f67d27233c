"""External-reference serialization: DataFrames, arrays and large values live in a blob store
(S3-compatible or a local folder) and checkpoints hold small content-addressed references.

Typical use::

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph_durable.serde import ExternalRefSerializer, S3BlobStore

    serde = ExternalRefSerializer(store=S3BlobStore("my-bucket", prefix="blobs"))
    saver = InMemorySaver(serde=serde)
"""

from langgraph_durable.serde.codecs import Codec, NumpyCodec, PolarsCodec, default_codecs
from langgraph_durable.serde.external import (
    EXTREF_TYPE,
    ExternalRefSerializer,
    collect_refs,
    parse_refs,
    refs_in,
)
from langgraph_durable.serde.extref_errors import (
    BlobIntegrityError,
    BlobNotFoundError,
    BlobStoreError,
    ExternalRefError,
    UnsupportedValueError,
)
from langgraph_durable.serde.gc import (
    DEFAULT_KEY_PATTERN,
    GcReport,
    acollect_garbage,
    collect_garbage,
)
from langgraph_durable.serde.pandas_codec import PandasCodec
from langgraph_durable.serde.s3_store import S3BlobStore
from langgraph_durable.serde.stores import (
    BaseBlobStore,
    BlobInfo,
    BlobStore,
    LocalBlobStore,
)

__all__ = [
    "DEFAULT_KEY_PATTERN",
    "EXTREF_TYPE",
    "BaseBlobStore",
    "BlobInfo",
    "BlobIntegrityError",
    "BlobNotFoundError",
    "BlobStore",
    "BlobStoreError",
    "Codec",
    "ExternalRefError",
    "ExternalRefSerializer",
    "GcReport",
    "LocalBlobStore",
    "NumpyCodec",
    "PandasCodec",
    "PolarsCodec",
    "S3BlobStore",
    "UnsupportedValueError",
    "acollect_garbage",
    "collect_garbage",
    "collect_refs",
    "default_codecs",
    "parse_refs",
    "refs_in",
]
