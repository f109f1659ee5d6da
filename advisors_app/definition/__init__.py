"""The definition pipeline: ``rows (the draft) → resolve → snapshot → lint → compile``.

Each step runs once, in this order, wherever a chain definition is read — admin save, API
write, publish, ``manage.py check``, playground and runtime:

- :func:`resolve_draft` reads a chain's rows and everything they refer to into a snapshot
  (canonical JSON; :func:`snapshot_hash` is its SHA-256);
- :func:`lint` and :func:`compile_snapshot` read only the snapshot, never the database;
  :func:`check` runs both and reports a build failure as lint ``E113``;
- :mod:`.versions` publishes snapshots as immutable versions and moves labels.
"""

from .compile import BuildServices, ChainConfigurationError, CompiledChain, compile_snapshot
from .diff import diff_snapshots
from .lint import LintMessage, lint
from .snapshot import SNAPSHOT_FORMAT, canonical_json, references_of, resolve_draft, snapshot_hash
from .versions import (
    Checked,
    PublishError,
    VersionLookupError,
    apply_snapshot,
    can_move_label,
    can_publish,
    check,
    check_draft,
    move_label,
    publish,
    resolve_snapshot,
    restore_to_draft,
    rollback,
    rollback_target,
)

__all__ = [
    "SNAPSHOT_FORMAT",
    "BuildServices",
    "ChainConfigurationError",
    "Checked",
    "CompiledChain",
    "LintMessage",
    "PublishError",
    "VersionLookupError",
    "apply_snapshot",
    "can_move_label",
    "can_publish",
    "canonical_json",
    "check",
    "check_draft",
    "compile_snapshot",
    "diff_snapshots",
    "lint",
    "move_label",
    "publish",
    "references_of",
    "resolve_draft",
    "resolve_snapshot",
    "restore_to_draft",
    "rollback",
    "rollback_target",
    "snapshot_hash",
]
