"""The records checkpoints deal in: a Checkpoint, what a diff or a restore found, and CheckpointError."""
from __future__ import annotations

from dataclasses import dataclass


class CheckpointError(Exception):
    """A checkpoint cannot be taken, found or restored; the message is one line."""

    def __init__(self, message: str, stderr: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.stderr = stderr  # git's whole stderr, for callers that parse it
        self.status = status


@dataclass(frozen=True)
class SkippedFile:
    path: str  # relative to the project directory
    reason: str  # "over size cap", "nested git repository", "unreadable"
    size: int | None = None


@dataclass(frozen=True)
class Checkpoint:
    id: str  # the shadow commit's full hash; any unique prefix of 4+ characters finds it
    label: str
    created: float  # Unix time
    meta: dict  # caller's data: kind, prompt, session_id, message_index, kv_tokens, ...
    tree: str
    skipped: tuple[SkippedFile, ...] = ()
    duration_s: float = 0.0  # how long the snapshot took (0.0 for checkpoints read back from the repo)

    @property
    def short_id(self) -> str:
        return self.id[:8]


@dataclass(frozen=True)
class FileChange:
    path: str
    action: str  # "modify" | "create" (exists in the checkpoint, not now) | "delete" (created since)
    lines_added: int | None = None  # None for binary files
    lines_removed: int | None = None


@dataclass(frozen=True)
class DiffStat:
    """What restoring a checkpoint would do to the files as they are now."""
    changes: tuple[FileChange, ...]
    kept: tuple[str, ...] = ()  # created since, but ignored now: left alone

    def summary(self) -> str:
        counts = {a: sum(c.action == a for c in self.changes) for a in ("modify", "create", "delete")}
        if not self.changes:
            return "no file changes"
        added = sum(c.lines_added or 0 for c in self.changes)
        removed = sum(c.lines_removed or 0 for c in self.changes)
        parts = [f"{counts['modify']} restored", f"{counts['create']} re-created", f"{counts['delete']} deleted"]
        return f"{', '.join(p for p in parts if not p.startswith('0 '))} (+{added} -{removed} lines)"


@dataclass(frozen=True)
class RestoreReport:
    checkpoint: Checkpoint  # what was restored
    backup: Checkpoint  # the state just before the restore: restore it to undo the rewind
    restored: tuple[str, ...]  # written back (modified or re-created)
    deleted: tuple[str, ...]  # created after the checkpoint, removed
    kept: tuple[str, ...] = ()  # created after the checkpoint but ignored now: left alone
