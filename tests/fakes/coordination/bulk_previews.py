"""``models.coordination.BulkPreviews`` in memory."""

from __future__ import annotations

from dataclasses import dataclass

from tests.fakes.coordination._memory import MemoryConcern, served


@dataclass(eq=False, repr=False)
class MemoryBulkPreviews(MemoryConcern):
    """The bulk previews of the fake store."""

    @served
    def save_bulk_preview(self, digest: str, payload: str, *, ttl_seconds: float) -> None:
        self._set(self.bulk_preview_key(digest), payload, ttl=max(1, int(ttl_seconds * 1000)) / 1000)

    @served
    def peek_bulk_preview(self, digest: str) -> str | None:
        return self._value(self.bulk_preview_key(digest))

    @served
    def take_bulk_preview(self, digest: str) -> str | None:
        value = self._value(self.bulk_preview_key(digest))
        self._delete(self.bulk_preview_key(digest))
        return value
