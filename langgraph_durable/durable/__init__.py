"""Durable tier: MongoDB, written behind through the outbox. Document shapes and indexes."""

from .documents import INDEXES, Collections

__all__ = ["INDEXES", "Collections"]
