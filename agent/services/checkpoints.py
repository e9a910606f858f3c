"""Checkpoints: snapshots of the project's files in a shadow git repository, and rewinding to them.

The shadow repository lives in <data dir>/checkpoints/<project key>/ with its own index; the project
directory is its work tree. Every git command gets GIT_DIR, GIT_WORK_TREE and GIT_INDEX_FILE (and
the object and config locations) explicitly, so the user's .git, index, stash, HEAD, config and hooks
are never touched. Snapshots read the work tree itself (`git add -A`), so changes made by Bash (rm,
mv, generators) are captured like the agent's own edits. A checkpoint is a commit on
refs/heads/checkpoints: a one-line label, a blank line, then a JSON block (label, created, meta,
skipped). Files ignored by .gitignore/.git/info/exclude, files over the size cap and nested git
repositories are never snapshotted, so a rewind never deletes them.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Iterator

from agent.paths import data_dir as default_data_dir
from agent.services.checkpoint_types import (Checkpoint, CheckpointError, DiffStat, FileChange, RestoreReport,
                                             SkippedFile)

REF = "refs/heads/checkpoints"
DEFAULT_MAX_FILE_BYTES = 5 * 1024 * 1024
GIT_TIMEOUT_S = 300.0
# Highest-precedence attributes in the shadow repo: store and restore bytes exactly (no eol
# conversion, no clean/smudge filters such as git-lfs, no re-encoding), whatever .gitattributes says.
_ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding\n"
_CONFIG = {"core.hooksPath": os.devnull, "commit.gpgSign": "false", "core.autocrlf": "false",
           "core.safecrlf": "false", "core.fsmonitor": "false", "core.quotePath": "false", "gc.auto": "0",
           "advice.addEmbeddedRepo": "false"}
# How `git add --ignore-errors` names a file it could not read.
_UNREADABLE = re.compile(r"""^error: (?:open\("(.+)"\): .*|unable to index file '(.+)')$""")


def shadow_key(project_dir: Path) -> str:
    """`<basename>-<12 hex of the absolute path's sha256>`: readable and unique per project."""
    path = str(Path(project_dir).resolve())
    name = re.sub(r"[^A-Za-z0-9._-]", "-", Path(path).name)[:40] or "root"
    return f"{name}-{hashlib.sha256(path.encode()).hexdigest()[:12]}"


class Checkpoints:
    """Snapshots of one project directory; safe to share between threads and processes."""

    def __init__(self, project_dir: Path, data_dir: Path | None = None,
                 max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> None:
        try:
            import git  # gitpython loads in ~0.1 s: only when checkpoints are used
        except ImportError as e:  # gitpython refuses to import without a git executable
            raise CheckpointError(f"checkpoints need git: {str(e).splitlines()[0]}") from None
        if max_file_bytes < 0:
            raise CheckpointError(f"max_file_bytes must be >= 0, not {max_file_bytes}")
        if data_dir is None:
            data_dir = default_data_dir()
        self.project_dir = Path(project_dir).resolve()
        if not self.project_dir.is_dir():
            raise CheckpointError(f"not a directory: {self.project_dir}")
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.git_dir = self.data_dir / "checkpoints" / shadow_key(self.project_dir)
        self.max_file_bytes = max_file_bytes
        self._index = self.git_dir / "index"
        self._git = git.Git(str(self.project_dir))
        self._command_error = git.GitCommandError
        self._thread_lock = threading.Lock()

    # -- public API ---------------------------------------------------------------------------

    def snapshot(self, label: str, meta: dict | None = None) -> Checkpoint:
        """Record the work tree as it is now (unchanged trees are reused, so this is cheap then)."""
        with self._locked():
            return self._snapshot(label, dict(meta or {}))

    def list(self, session_id: str | None = None) -> list[Checkpoint]:
        """Checkpoints newest first, optionally only those whose meta names `session_id`."""
        if not (self.git_dir / "HEAD").is_file() or self._head() is None:
            return []
        out = self._run(["log", "-z", "--format=%H%x1f%T%x1f%B", REF, "--"])
        found = [self._parse(record) for record in out.split(b"\0") if record.strip()]
        return [c for c in found if session_id is None or c.meta.get("session_id") == session_id]

    def get(self, checkpoint_id: str) -> Checkpoint:
        """The checkpoint whose id starts with `checkpoint_id` (4+ hex characters, unique)."""
        prefix = checkpoint_id.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{4,40}", prefix):
            raise CheckpointError(f"not a checkpoint id: {checkpoint_id!r} (expected 4-40 hex characters)")
        matches = [c for c in self.list() if c.id.startswith(prefix)]
        if not matches:
            raise CheckpointError(f"no checkpoint {checkpoint_id} for {self.project_dir}")
        if len(matches) > 1:
            raise CheckpointError(f"checkpoint id {checkpoint_id} is ambiguous ({len(matches)} match); give more characters")
        return matches[0]

    def diff_stat(self, checkpoint_id: str) -> DiffStat:
        """What restore_code would change, computed on a scratch index (records nothing)."""
        with self._locked():
            target = self.get(checkpoint_id)
            scratch = self.git_dir / f"index.scratch-{os.getpid()}-{threading.get_ident()}"
            try:
                if self._index.exists():
                    shutil.copyfile(self._index, scratch)  # keeps the stat cache: only changed files are hashed
                current, _ = self._stage(self._env(scratch))
            finally:
                scratch.unlink(missing_ok=True)
            writes, deletes = self._tree_diff(current, target.tree)
            deletes, kept = self._split_ignored(deletes)
            counts = self._numstat(current, target.tree)
            changes = [FileChange(p, "create" if s == "A" else "modify", *counts.get(p, (None, None)))
                       for p, s in writes] + [FileChange(p, "delete", *counts.get(p, (None, None))) for p in deletes]
            return DiffStat(tuple(sorted(changes, key=lambda c: c.path)), tuple(kept))

    def restore_code(self, checkpoint_id: str, backup_meta: dict | None = None) -> RestoreReport:
        """Put the files back as they were at the checkpoint; files created since are deleted.

        The current state is snapshotted first (kind "rewind", plus `backup_meta`), so a rewind can
        itself be undone. Ignored files, files over the size cap and nested repositories are left alone.
        """
        with self._locked():
            target = self.get(checkpoint_id)
            meta = {"kind": "rewind", "rewound_to": target.id, **(backup_meta or {})}
            if "session_id" in target.meta:
                meta.setdefault("session_id", target.meta["session_id"])
            backup = self._snapshot(f"before rewind to {target.short_id}", meta)
            writes, deletes = self._tree_diff(backup.tree, target.tree)
            deletes, kept = self._split_ignored(deletes)
            try:  # two-tree merge: the index becomes the target and keeps stat data of unchanged files
                self._run(["read-tree", "-m", backup.tree, target.tree])
            except CheckpointError:
                self._run(["read-tree", target.tree])
            deleted = [p for p in deletes if self._delete(p)]
            restored = [p for p, _ in writes]
            if restored:
                self._run(["checkout-index", "-u", "-f", "-z", "--stdin"],
                          stdin=b"".join(os.fsencode(p) + b"\0" for p in restored))
            return RestoreReport(target, backup, tuple(restored), tuple(deleted), tuple(kept))

    # -- snapshots ----------------------------------------------------------------------------

    def _snapshot(self, label: str, meta: dict) -> Checkpoint:
        start = time.perf_counter()
        self._ensure_repo()
        tree, skipped = self._stage(self._env())
        parent = self._head()
        created = time.time()
        body = {"label": label, "created": created, "meta": meta,
                "skipped": [[s.path, s.reason, s.size] for s in skipped[:200]]}
        title = re.sub(r"\s+", " ", label).strip()[:200] or "checkpoint"
        message = f"{title}\n\n{json.dumps(body, ensure_ascii=False)}\n"
        commit = self._run(["commit-tree", "--no-gpg-sign", tree, *(["-p", parent] if parent else []), "-F", "-"],
                           stdin=message.encode("utf-8")).decode().strip()
        self._run(["update-ref", "-m", "checkpoint", REF, commit, parent or ""])
        return Checkpoint(commit, label, created, meta, tree, tuple(skipped), time.perf_counter() - start)

    def _stage(self, env: dict[str, str]) -> tuple[str, list[SkippedFile]]:
        """Bring the index at env's GIT_INDEX_FILE up to the work tree; returns (tree id, skipped files)."""
        self._sync_excludes()
        listed = self._run(["ls-files", "-z", "--modified", "--others", "--exclude-standard"], env=env)
        skipped: list[SkippedFile] = []
        for raw in listed.split(b"\0"):
            rel = os.fsdecode(raw)
            if not rel:
                continue
            if rel.endswith("/"):  # git lists a nested repository as a directory it will not enter
                skipped.append(SkippedFile(rel.rstrip("/"), "nested git repository"))
                continue
            try:
                st = os.lstat(self.project_dir / rel)
            except FileNotFoundError:
                continue  # deleted since the last snapshot: `add -A` records that
            except OSError:
                skipped.append(SkippedFile(rel, "unreadable"))
                continue
            if stat.S_ISREG(st.st_mode) and st.st_size > self.max_file_bytes:
                skipped.append(SkippedFile(rel, "over size cap", st.st_size))
        excluded = [s.path for s in skipped] + self._internal_paths()
        if excluded:  # a file that grew past the cap leaves the snapshot instead of keeping a stale copy
            self._run(["rm", "--cached", "-r", "-f", "-q", "--ignore-unmatch", "--pathspec-from-file=-",
                       "--pathspec-file-nul"], env=env, stdin=_pathspecs(f":(top,literal){p}" for p in excluded))
        specs = [":/", *(f":(top,exclude,literal){p}" for p in excluded)]
        try:
            self._run(["add", "-A", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul"],
                      env=env, stdin=_pathspecs(specs))
        except CheckpointError as e:  # --ignore-errors: the index is written, unreadable files are named
            bad = sorted({m.group(1) or m.group(2) for line in e.stderr.splitlines()
                          if (m := _UNREADABLE.match(line))})
            if not bad:
                raise
            skipped += [SkippedFile(p, "unreadable") for p in bad]
        tree = self._run(["write-tree"], env=env).decode().strip()
        return tree, sorted(skipped, key=lambda s: s.path)

    def _internal_paths(self) -> list[str]:
        """Our own data (transcripts, this repository) if it lives inside the project: never snapshotted."""
        try:
            return [self.data_dir.relative_to(self.project_dir).as_posix()]
        except ValueError:
            return []

    def _sync_excludes(self) -> None:
        """Copy the user's .git/info/exclude into ours, so the same files are ignored."""
        user = _user_exclude_file(self.project_dir)
        text = user.read_text(encoding="utf-8", errors="surrogateescape") if user and user.is_file() else ""
        ours = self.git_dir / "info" / "exclude"
        if not ours.exists() or ours.read_text(encoding="utf-8", errors="surrogateescape") != text:
            _atomic_write(ours, text.encode("utf-8", errors="surrogateescape"))

    # -- restore helpers ----------------------------------------------------------------------

    def _tree_diff(self, a: str, b: str) -> tuple[list[tuple[str, str]], list[str]]:
        """Going from tree a to tree b: ([(path, 'A'|'M'|'T') to write], [paths to delete])."""
        out = self._run(["diff-tree", "-r", "-z", "--no-renames", "--name-status", a, b])
        fields = out.split(b"\0")
        writes, deletes = [], []
        for status_, raw in zip(fields[0::2], fields[1::2]):
            path, code = os.fsdecode(raw), status_.decode()[:1]
            (deletes.append(path) if code == "D" else writes.append((path, code)))
        return writes, deletes

    def _numstat(self, a: str, b: str) -> dict[str, tuple[int | None, int | None]]:
        out = self._run(["diff-tree", "-r", "-z", "--no-renames", "--numstat", a, b])
        counts = {}
        for record in out.split(b"\0"):
            parts = record.split(b"\t", 2)
            if len(parts) == 3:
                added, removed = (None if x == b"-" else int(x) for x in parts[:2])
                counts[os.fsdecode(parts[2])] = (added, removed)
        return counts

    def _split_ignored(self, paths: list[str]) -> tuple[list[str], list[str]]:
        """(paths to delete, paths ignored now and so left alone)."""
        if not paths:
            return [], []
        try:
            out = self._run(["check-ignore", "--no-index", "-z", "--stdin"],
                            stdin=b"".join(os.fsencode(p) + b"\0" for p in paths))
        except CheckpointError as e:
            if e.status == 1:  # none of them is ignored
                return list(paths), []
            raise
        ignored = {os.fsdecode(p) for p in out.split(b"\0") if p}
        return [p for p in paths if p not in ignored], [p for p in paths if p in ignored]

    def _delete(self, rel: str) -> bool:
        """Remove a file created after the checkpoint, then directories it leaves empty."""
        path = self.project_dir / rel
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                return False
            path.unlink()
        except FileNotFoundError:
            return False
        parent = path.parent
        while parent != self.project_dir and self.project_dir in parent.parents:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent
        return True

    # -- the shadow repository ----------------------------------------------------------------

    def _ensure_repo(self) -> None:
        if (self.git_dir / "HEAD").is_file():
            return
        self._run(["init", "-q", "--template=", f"--initial-branch={REF.rsplit('/', 1)[1]}"])
        for key, value in _CONFIG.items():
            self._run(["config", key, value])
        _atomic_write(self.git_dir / "info" / "attributes", _ATTRIBUTES.encode())
        _atomic_write(self.git_dir / "agent-project", f"{self.project_dir}\n".encode())

    def _head(self) -> str | None:
        try:
            return self._run(["rev-parse", "-q", "--verify", f"{REF}^{{commit}}"]).decode().strip() or None
        except CheckpointError:
            return None

    def _parse(self, record: bytes) -> Checkpoint:
        commit, tree, message = record.decode("utf-8", errors="replace").lstrip("\n").split("\x1f", 2)
        _, _, body = message.partition("\n\n")
        try:
            data = json.loads(body)
        except json.JSONDecodeError:  # written by something else: keep it listable
            data = {"label": message.split("\n", 1)[0]}
        skipped = tuple(SkippedFile(*s) for s in data.get("skipped") or [])
        return Checkpoint(commit, data.get("label", ""), float(data.get("created", 0.0)), data.get("meta") or {},
                          tree, skipped)

    def _env(self, index: Path | None = None) -> dict[str, str]:
        """Every location git could take from the user's environment or config, pinned to ours."""
        return {"GIT_DIR": str(self.git_dir), "GIT_WORK_TREE": str(self.project_dir),
                "GIT_INDEX_FILE": str(index or self._index), "GIT_COMMON_DIR": str(self.git_dir),
                "GIT_OBJECT_DIRECTORY": str(self.git_dir / "objects"), "GIT_ALTERNATE_OBJECT_DIRECTORIES": "",
                "GIT_NAMESPACE": "", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_CONFIG_COUNT": "0", "GIT_CONFIG_PARAMETERS": "", "GIT_TERMINAL_PROMPT": "0",
                "GIT_LITERAL_PATHSPECS": "0", "GIT_GLOB_PATHSPECS": "0", "GIT_NOGLOB_PATHSPECS": "0",
                "GIT_ICASE_PATHSPECS": "0", "GIT_AUTHOR_NAME": "agent checkpoints",
                "GIT_AUTHOR_EMAIL": "checkpoints@agent.invalid", "GIT_COMMITTER_NAME": "agent checkpoints",
                "GIT_COMMITTER_EMAIL": "checkpoints@agent.invalid"}

    def _run(self, args: list[str], env: dict[str, str] | None = None, stdin: bytes | None = None) -> bytes:
        """stdout of `git args` in the shadow environment; failures raise CheckpointError(line, stderr, code)."""
        with _stdin_file(stdin) as istream:
            try:
                return self._git.execute(["git", *args], istream=istream, env=env or self._env(),
                                         stdout_as_string=False, strip_newline_in_stdout=False,
                                         kill_after_timeout=GIT_TIMEOUT_S)
            except self._command_error as e:
                stderr = e.stderr if isinstance(e.stderr, str) else os.fsdecode(e.stderr or b"")
                stderr = stderr.strip().removeprefix("stderr: ").strip("'\n ")
                last = stderr.splitlines()[-1] if stderr else f"exit status {e.status}"
                raise CheckpointError(f"git {args[0]} failed in the checkpoint repository: {last}",
                                      stderr, e.status) from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One snapshot or restore at a time: threads by a lock, processes by flock on a file."""
        with self._thread_lock:
            self.git_dir.mkdir(parents=True, exist_ok=True)
            with open(self.git_dir / "agent.lock", "a+b") as f:
                try:
                    import fcntl  # POSIX only
                except ImportError:  # no flock (Windows): threads are still serialized
                    yield
                    return
                fcntl.flock(f, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(f, fcntl.LOCK_UN)


def _user_exclude_file(project_dir: Path) -> Path | None:
    """The project's own info/exclude: .git/info/exclude, or the common dir's for worktrees."""
    dot_git = project_dir / ".git"
    if dot_git.is_dir():
        return dot_git / "info" / "exclude"
    if not dot_git.is_file():
        return None
    m = re.match(r"gitdir:\s*(.+)", dot_git.read_text(errors="replace").strip())
    if not m:
        return None
    git_dir = (project_dir / m.group(1).strip()).resolve()
    common = git_dir / "commondir"
    if common.is_file():
        git_dir = (git_dir / common.read_text().strip()).resolve()
    return git_dir / "info" / "exclude"


def _pathspecs(specs) -> bytes:
    return b"".join(os.fsencode(s) + b"\0" for s in specs)


@contextlib.contextmanager
def _stdin_file(data: bytes | None) -> Iterator[IO[bytes] | None]:
    """gitpython hands stdin to Popen as a file, so input goes through an unnamed temp file."""
    if data is None:
        yield None
        return
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(0)
        yield f


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
