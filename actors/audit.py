"""The audit log's retention actor: delete entries older than AUDIT_RETENTION_DAYS (daily)."""

from __future__ import annotations

import dramatiq

from actors.actor_runtime import current
from actors.broker import QUEUE_DEFAULT
from models.audit import prune_audit


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def prune_audit_log() -> dict:
    """Delete the audit entries older than AUDIT_RETENTION_DAYS; returns {"deleted", "days"}."""
    days = current().settings.audit_retention_days
    return {"deleted": prune_audit(days=days), "days": days}
