"""Which chain version a turn runs, and its built client, cached in-process by snapshot hash.

:func:`resolve_target` turns ``(slug, label or version)`` into a :class:`ChainTarget` with one
indexed query (the label's version and its ``snapshot_hash``); :func:`compiled_chain` returns
the :class:`~advisors_app.definition.CompiledChain` cached under that hash, loading and
compiling the version's snapshot only on a miss. A label moved in any process is therefore
seen by every process on its next request: there is nothing to invalidate, since a version
never changes and the hash names its content.

A version of a chain without a model of its own runs on the deployment's default chat model:
the model-config row of the default alias as it was when the version was published, or, when
``ADVISORS["DEFAULT_CHAT_MODEL"]`` now names another alias (an operator moved the deployment
to another model), that alias's row or settings. For that case the same query reads when the
current alias's row last changed, and the cache key includes it.

``version="draft"`` runs the chain's editable rows (resolved and compiled per request): the
playground's and staff's way to try an edit before publishing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.signals import setting_changed
from django.db.models import CharField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Cast, Coalesce, Concat

from advisors_app.conf import app_settings
from advisors_app.db.prepared import PreparedQuery
from advisors_app.definition import (
    ChainConfigurationError,
    CompiledChain,
    check,
    compile_snapshot,
    resolve_draft,
)
from advisors_app.exceptions import Refusal
from advisors_app.models import (
    PRODUCTION,
    AdvisorChain,
    ChainVersion,
    ChatModelConfig,
    Experiment,
)
from advisors_app.security import redaction

__all__ = [
    "CACHE_SIZE",
    "DRAFT",
    "ChainConfigurationError",
    "ChainNotFound",
    "ChainTarget",
    "VersionNotFound",
    "clear_cache",
    "compiled_chain",
    "load_chain",
    "resolve_target",
    "target_of",
    "target_read",
]

#: Built chains kept per process (least recently used dropped first).
CACHE_SIZE = 64
#: The ``version`` that names a chain's editable rows rather than a published version.
DRAFT = "draft"


class ChainNotFound(Refusal, LookupError):
    """Raised when no chain has the slug, or the chain is disabled (404 ``chain_not_found``)."""

    code = "chain_not_found"
    http_status = 404

    def __init__(self, slug: str) -> None:
        message = f"No enabled chain {slug!r}."
        super().__init__(message, fields={"chain": [message]})
        self.slug = slug


class VersionNotFound(Refusal, LookupError):
    """Raised when the chain has no such label or version, or nothing published yet (404
    ``version_not_found``)."""

    code = "version_not_found"
    http_status = 404


@dataclass(frozen=True)
class ChainTarget:
    """What a turn runs: a chain's version (``version_id=None`` for the draft), the label
    asked for, and the chain's ``version_policy``."""

    chain_id: int
    slug: str
    version_id: int | None
    number: int | None
    snapshot_hash: str
    label: str
    version_policy: str
    #: When the model-config row named like ``DEFAULT_CHAT_MODEL`` last changed (``None``: no
    #: such row, the settings' alias serves): chains without a model of their own use it.
    default_model_changed: datetime | None = None
    #: ``"<id>:<revision>"`` of the running or paused experiment of the label asked for, read
    #: with the version (blank: none; :mod:`advisors_app.experiments.serving`).
    experiment: str = ""
    #: ``(experiment id, arm name)`` when an experiment chose this version for the turn.
    arm: tuple[int, str] | None = None

    @property
    def cache_key(self) -> str:
        stamp = self.default_model_changed.isoformat() if self.default_model_changed else ""
        return f"{self.snapshot_hash}:{stamp}"

    @property
    def is_draft(self) -> bool:
        return self.version_id is None


def _experiment_of(lookup: str, value: Any) -> Any:
    """The stamp (``"<id>:<revision>"``) of the label's active experiment, for the label
    query (the number query names no label: blank). At most one row: a partial unique index
    (:class:`~advisors_app.models.Experiment`)."""
    if lookup != "labels__name":
        return Value("")
    active = Experiment.objects.filter(
        chain_id=OuterRef("chain_id"), label=value, status__in=Experiment.ACTIVE
    ).order_by()
    stamp = Concat(Cast("id", CharField()), Value(":"), Cast("revision", CharField()))
    return Coalesce(
        Subquery(active.annotate(stamp=stamp).values("stamp")[:1]),
        Value(""),
        output_field=CharField(),
    )


def _version_query(lookup: str, placeholder: Any) -> PreparedQuery:
    """The version of an enabled chain whose ``lookup`` (a label's name, a number) matches,
    with what a turn reads of it, when the model-config row of the default alias last
    changed and the label's active experiment (read in the same query). Run on every turn, so
    compiled once (see :mod:`advisors_app.db.prepared`); the placeholders are values no chain,
    label or alias has.
    """

    def build(slug: str, alias: str, value: Any) -> QuerySet[ChainVersion]:
        default_model = ChatModelConfig.objects.filter(slug=alias).order_by()
        return (
            ChainVersion.objects.filter(chain__slug=slug, chain__enabled=True, **{lookup: value})
            .annotate(default_model_changed=Subquery(default_model.values("updated_at")[:1]))
            .annotate(experiment=_experiment_of(lookup, value))
            .values_list(
                "id",
                "number",
                "snapshot_hash",
                "chain_id",
                "chain__version_policy",
                "default_model_changed",
                "experiment",
            )
            .order_by()[:1]
        )

    return PreparedQuery(build, slug="\x00slug", alias="\x00alias", value=placeholder)


_BY_LABEL = _version_query("labels__name", "\x00label")
_BY_NUMBER = _version_query("number", 2_000_000_003)


def _default_chat_model() -> dict[str, Any] | None:
    """The default alias's model-config row as the provider registry reads it, if one exists
    (it wins over the settings' alias of the same name)."""
    row = ChatModelConfig.objects.filter(slug=app_settings.DEFAULT_CHAT_MODEL).first()
    return row.to_config() if row is not None else None


def resolve_target(
    slug: str, *, label: str | None = None, version: int | str | None = None
) -> ChainTarget:
    """The version ``slug`` serves for ``label`` (default ``production``) or ``version``
    (a number, or :data:`DRAFT`). Blocking: one query (two when nothing matches).

    Raises :class:`ChainNotFound` for an unknown or disabled chain and
    :class:`VersionNotFound` when the label or version does not exist.
    """
    if version == DRAFT:
        chain = AdvisorChain.objects.filter(slug=slug, enabled=True).first()
        if chain is None:
            raise ChainNotFound(slug)
        return ChainTarget(chain.pk, slug, None, None, "", DRAFT, chain.version_policy)
    query, values = target_read(slug, label=label, version=version)
    return target_of(slug, query.rows(**values), label=label, version=version)


def target_read(
    slug: str, *, label: str | None = None, version: int | str | None = None
) -> tuple[PreparedQuery, dict[str, Any]]:
    """The query of a published version for :func:`resolve_target` (not the draft), to read
    with other queries at once (:func:`~advisors_app.db.prepared.rows_together`); its rows go
    to :func:`target_of`."""
    alias = app_settings.DEFAULT_CHAT_MODEL
    if version is not None:
        return _BY_NUMBER, {"slug": slug, "alias": alias, "value": version}
    return _BY_LABEL, {"slug": slug, "alias": alias, "value": label or PRODUCTION}


def target_of(
    slug: str,
    rows: list[tuple[Any, ...]],
    *,
    label: str | None = None,
    version: int | str | None = None,
) -> ChainTarget:
    """The :class:`ChainTarget` the rows of :func:`target_read` name; raises as
    :func:`resolve_target` does."""
    asked = "" if version is not None else label or PRODUCTION
    if not rows:
        _raise_missing(slug, f"version {version}" if version is not None else f"label {asked!r}")
    version_id, number, snapshot_hash, chain_id, policy, default_model_changed, experiment = rows[0]
    return ChainTarget(
        chain_id,
        slug,
        version_id,
        number,
        snapshot_hash,
        asked,
        policy,
        default_model_changed,
        experiment or "",
    )


def _raise_missing(slug: str, what: str) -> Any:
    if not AdvisorChain.objects.filter(slug=slug, enabled=True).exists():
        raise ChainNotFound(slug)
    if not ChainVersion.objects.filter(chain__slug=slug).exists():
        raise VersionNotFound(
            f"chain {slug!r} has no published version yet: publish it in the admin or "
            f"POST /api/chains/{slug}/versions/"
        )
    raise VersionNotFound(f"chain {slug!r} has no {what}")


_cache: OrderedDict[str, CompiledChain] = OrderedDict()
_lock = threading.RLock()


def _cached(digest: str) -> CompiledChain | None:
    with _lock:
        found = _cache.get(digest)
        if found is not None:
            _cache.move_to_end(digest)
        return found


def _keep(key: str, compiled: CompiledChain) -> CompiledChain:
    with _lock:
        found = _cache.get(key)
        if found is not None:
            return found
        _cache[key] = compiled
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
        return compiled


def compiled_chain(target: ChainTarget) -> CompiledChain:
    """The built chain of ``target`` (blocking: queries only when not cached yet).

    Raises :class:`~advisors_app.definition.ChainConfigurationError` when it cannot be built
    (a draft with lint errors, or a published version whose advisor type or tool has been
    unregistered from the code since).
    """
    if target.is_draft:
        # The draft's snapshot holds the default model's row itself (definition.snapshot).
        checked = check(resolve_draft(AdvisorChain.objects.get(pk=target.chain_id)))
        if checked.compiled is None:
            raise ChainConfigurationError("; ".join(f"{m.id}: {m}" for m in checked.errors))
        key = f"draft:{checked.snapshot_hash}"
        found = _cached(key)
        if found is not None:
            return found
        redaction.learn_snapshot(checked.snapshot)
        return _keep(key, checked.compiled)
    found = _cached(target.cache_key)
    if found is not None:
        return found
    snapshot = ChainVersion.objects.values_list("snapshot", flat=True).get(pk=target.version_id)
    redaction.learn_snapshot(snapshot)
    # A version published under another default alias runs on this deployment's default.
    stale = snapshot.get("default_chat_model") != app_settings.DEFAULT_CHAT_MODEL
    default = _default_chat_model() if snapshot["chat_model"] is None and stale else None
    return _keep(target.cache_key, compile_snapshot(snapshot, default_chat_model=default))


def load_chain(
    slug: str, *, label: str | None = None, version: int | str | None = None
) -> CompiledChain:
    """The built chain ``slug`` serves for ``label``/``version`` (default: ``production``).

    Blocking. Raises :class:`ChainNotFound`, :class:`VersionNotFound` and
    :class:`~advisors_app.definition.ChainConfigurationError`.
    """
    return compiled_chain(resolve_target(slug, label=label, version=version))


def clear_cache() -> None:
    """Drop every built chain of this process (they are rebuilt on their next request)."""
    with _lock:
        _cache.clear()


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "ADVISORS":
        clear_cache()


setting_changed.connect(_settings_changed, dispatch_uid="advisors_runtime_settings")
