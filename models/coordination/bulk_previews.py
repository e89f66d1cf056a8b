"""Bulk previews: a bulk action's preview kept until its confirmed call takes it (REDIS_URL)."""

from __future__ import annotations

from dataclasses import dataclass

from models.coordination._redis import RedisConcern, text, translated


@dataclass(eq=False, repr=False)
class BulkPreviews(RedisConcern):
    """A preview (its action, filter, match ids and caller, JSON) under its confirm token's digest."""

    @translated
    def save_bulk_preview(self, digest: str, payload: str, *, ttl_seconds: float) -> None:
        """Keep a bulk action's preview (JSON) under its confirm token's digest for ``ttl_seconds``."""
        self.client.set(self.bulk_preview_key(digest), payload, px=max(1, int(ttl_seconds * 1000)))

    @translated
    def peek_bulk_preview(self, digest: str) -> str | None:
        """The preview kept under ``digest``, left in place (checked before it is taken); None if gone."""
        return text(self.client.get(self.bulk_preview_key(digest)))

    @translated
    def take_bulk_preview(self, digest: str) -> str | None:
        """The preview kept under ``digest``, deleted as it is read (GETDEL: one use); None if gone."""
        return text(self.client.getdel(self.bulk_preview_key(digest)))
