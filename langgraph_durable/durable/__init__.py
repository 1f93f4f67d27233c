"""Durable tier: MongoDB, written behind through the outbox. Document shapes and indexes."""

from .documents import Collections, INDEXES

__all__ = ["INDEXES", "Collections"]
