"""``DjangoAuditSink``: stores ``AuditRecord`` objects as ``AuditEntry`` rows."""

from __future__ import annotations

from advisors_app.core.advisors.audit import AuditRecord
from advisors_app.models import AuditEntry

__all__ = ["DjangoAuditSink"]


class DjangoAuditSink:
    """Writes each record as one :class:`~advisors_app.models.AuditEntry` with the async ORM.

    ``AuditAdvisor(DjangoAuditSink())`` then audits every call to the database, off the event
    loop (Django runs the query in its thread-sensitive executor). ``using`` picks a database
    alias other than ``"default"``.
    """

    def __init__(self, using: str = "default") -> None:
        self.using = using

    async def write(self, record: AuditRecord) -> None:
        await AuditEntry.objects.using(self.using).acreate(
            started_at=record.started_at,
            mode=record.mode,
            status=record.status,
            conversation_id=record.conversation_id or "",
            request_text=record.request_text,
            prompt=record.prompt,
            response_text=record.response_text,
            finish_reason=record.finish_reason or "",
            usage=record.usage,
            duration=record.duration,
            error=record.error or "",
            context=record.context,
        )
