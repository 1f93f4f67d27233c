"""Helpers shared by the serde tests (no fixtures here)."""

from __future__ import annotations

import os
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from langgraph.checkpoint.serde.base import CipherProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.serde import BlobStore, LocalBlobStore, S3BlobStore


class AesGcmCipher(CipherProtocol):
    """A minimal LangGraph ``CipherProtocol`` (AES-GCM, random nonce), as pycryptodome is not
    installed for ``EncryptedSerializer.from_pycryptodome_aes``."""

    name = "aesgcm"

    def __init__(self, key: bytes = b"1" * 16) -> None:
        self._aead = AESGCM(key)

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(12)
        return self.name, nonce + self._aead.encrypt(nonce, plaintext, None)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == self.name, ciphername
        return self._aead.decrypt(ciphertext[:12], ciphertext[12:], None)


def encrypted_inner(key: bytes = b"1" * 16) -> EncryptedSerializer:
    """An ``EncryptedSerializer`` around ``JsonPlusSerializer`` with :class:`AesGcmCipher`."""
    return EncryptedSerializer(AesGcmCipher(key), JsonPlusSerializer())


def bucket_objects(s3_client: Any, bucket: str) -> list[str]:
    """Every object key in the bucket, counted by the S3 server itself."""
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return [item["Key"] for page in pages for item in page.get("Contents", ())]


def blob_count(store: BlobStore) -> int:
    """How many blobs ``store`` lists."""
    return len(list(store.list_keys()))


def corrupt(store: BlobStore, key: str, data: bytes) -> None:
    """Overwrite a blob in place, behind the store's back."""
    if isinstance(store, LocalBlobStore):
        (store.root / key[:2] / key).write_bytes(data)
    else:
        assert isinstance(store, S3BlobStore)
        store.client.put_object(Bucket=store.bucket, Key=store.prefix + key, Body=data)
