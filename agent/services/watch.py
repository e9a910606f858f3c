"""File watching (watchdog): stale reads and configuration reloads.

FileWatcher notices when a file the agent has read changes on disk behind its back. Events only
nominate candidates; a candidate is stale when its size or mtime differs from the FileStamp the
tools recorded at the last Read/Write/Edit, so the agent's own writes (which re-stamp the file) are
never reported. ConfigWatcher calls a reload callback, debounced, when settings, hooks, skills,
agents or commands change under the configuration directories.

Each watched directory costs an inotify instance (128 per user by default), so FileWatcher watches
at most `max_dirs` directories and stat-checks files in the others on every stale() call.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping

from watchdog.events import (DirCreatedEvent, DirDeletedEvent, DirMovedEvent, FileClosedEvent, FileCreatedEvent,
                             FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileSystemEvent,
                             FileSystemEventHandler)
from watchdog.observers import Observer

from tools.base import FileStamp

ReadFiles = Mapping[str, FileStamp]
# Opened/closed-without-write events are left out: reading a file must not look like a change.
_FILE_EVENTS = [FileModifiedEvent, FileCreatedEvent, FileDeletedEvent, FileMovedEvent, FileClosedEvent,
                DirDeletedEvent, DirMovedEvent]
_CONFIG_EVENTS = _FILE_EVENTS + [DirCreatedEvent]
CONFIG_FILES = frozenset({"settings.json", "settings.local.json"})
CONFIG_SUBDIRS = frozenset({"hooks", "skills", "agents", "commands"})
JOIN_TIMEOUT_S = 5.0


def config_roots(project_dir: Path, agent_home: Path, claude_home: Path) -> list[Path]:
    """Where settings, hooks, skills, agents and commands live, project first, then user."""
    project_dir = Path(project_dir).resolve()
    return [project_dir / ".agent", project_dir / ".claude", project_dir / ".agents", agent_home, claude_home]


def stale_notice(paths: Iterable[str], cwd: Path) -> str | None:
    """The line the model is told at its next turn, or None when nothing is stale."""
    shown = sorted(_display(p, Path(cwd)) for p in paths)
    if not shown:
        return None
    return ("These files changed on disk since you last read them; Read them again before editing: "
            + ", ".join(shown))


class FileWatcher:
    """Stale reads: files in `read_files` (live mapping or callable) whose stamp no longer matches the disk."""

    def __init__(self, read_files: ReadFiles | Callable[[], ReadFiles],
                 on_change: Callable[[set[str]], None] | None = None, *, max_dirs: int = 64,
                 debounce_s: float = 0.2) -> None:
        self._source = read_files if callable(read_files) else (lambda: read_files)
        self._on_change = on_change
        self.max_dirs = max_dirs
        self.degraded: str | None = None  # why watching fell back to polling, if it did
        self.errors: list[str] = []  # on_change failures (the watcher keeps running)
        self._lock = threading.Lock()  # shared with the observer thread: candidates and known paths
        self._refresh_lock = threading.Lock()  # watches and polled directories
        self._candidates: set[str] = set()  # paths an event or a new read nominated for a stamp check
        self._known: set[str] = set()  # read files seen at the last refresh
        self._watches: dict[str, object] = {}  # directory -> ObservedWatch
        self._polled: set[str] = set()  # directories stat-checked on every stale() call
        self._reported: set[str] = set()
        self._gone: set[str] = set()  # directories deleted or moved away: their watches are dead
        self._handler = _Handler(self._on_event)
        self._observer = Observer()
        self._debouncer = _Debouncer(debounce_s, self._notify, "file-watcher-debounce")
        self._started = False

    def start(self) -> "FileWatcher":
        if not self._started:
            self._started = True
            try:
                self._observer.start()
            except OSError as e:
                self.degraded = f"file watching unavailable ({e.strerror or e}); polling instead"
            self.refresh()
        return self

    def refresh(self) -> None:
        """Watch the directories of files read since the last call (and stop watching unused ones)."""
        files = _copy(self._source)
        dirs = {os.path.dirname(p) for p in files}
        with self._lock:
            self._candidates |= files.keys() - self._known  # may have changed before its directory was watched
            self._known = set(files)
            gone, self._gone = self._gone, set()
        # The observer thread never takes _refresh_lock, so calling into the observer under it cannot deadlock.
        with self._refresh_lock:
            self._polled &= dirs
            for d in [d for d in self._watches if d not in dirs or d in gone]:
                _unschedule(self._observer, self._watches.pop(d))
            for d in sorted(dirs - self._watches.keys()):  # polled directories are retried: they may be back
                if self.degraded or len(self._watches) >= self.max_dirs or not os.path.isdir(d):
                    self._polled.add(d)
                    continue
                try:
                    self._watches[d] = self._observer.schedule(self._handler, d, recursive=False,
                                                               event_filter=_FILE_EVENTS)
                    self._polled.discard(d)
                except OSError:  # out of inotify instances or watches
                    self._polled.add(d)

    def stale(self) -> set[str]:
        """Read files that changed on disk (or vanished) since the agent last read or wrote them."""
        self.refresh()
        files = _copy(self._source)
        with self._refresh_lock:
            polled = set(self._polled)
        with self._lock:
            check = self._candidates | {p for p in files if os.path.dirname(p) in polled}
            self._candidates = set()
        result = {p for p in check if p in files and file_stamp(p) != files[p]}
        with self._lock:
            self._candidates |= result  # still stale until the agent reads it again
            self._reported &= result
        return result

    def new_stale(self) -> set[str]:
        """Stale files not returned by an earlier new_stale() (tell the model once per change)."""
        current = self.stale()
        with self._lock:
            new = current - self._reported
            self._reported |= new
        return new

    def close(self) -> None:
        _stop(self._observer, self._started)
        self._debouncer.close()

    def __enter__(self) -> "FileWatcher":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _on_event(self, event: FileSystemEvent) -> None:
        paths = {os.fsdecode(event.src_path), os.fsdecode(event.dest_path or b"")}
        with self._lock:
            if event.is_directory:  # rescheduled by the next refresh() if it comes back
                self._gone.add(os.fsdecode(event.src_path))
            hit = paths & self._known
            self._candidates |= hit
        if hit and self._on_change is not None:
            self._debouncer.add(hit)

    def _notify(self, paths: set[str]) -> None:
        # After the debounce the agent's own write has re-stamped the file, so it is not reported.
        files = _copy(self._source)
        changed = {p for p in paths if p in files and file_stamp(p) != files[p]}
        if changed:
            try:
                self._on_change(changed)
            except Exception as e:  # a UI callback bug must not stop the watcher
                self.errors.append(f"on_change failed: {type(e).__name__}: {e}")


RESCAN_S = 0.5  # a directory watched anew is looked at again after this long


class ConfigWatcher:
    """Calls on_reload(changed paths) once things settle after settings/hooks/skills/agents/commands change."""

    def __init__(self, roots: Iterable[Path], on_reload: Callable[[set[str]], None], *,
                 debounce_s: float = 0.3) -> None:
        self.roots = [Path(r).expanduser().absolute() for r in roots]
        self.errors: list[str] = []
        self.degraded: str | None = None
        self._on_reload = on_reload
        self._watches: dict[tuple[str, bool], object] = {}
        self._handler = _Handler(self._on_event)
        self._observer = Observer()
        self._debouncer = _Debouncer(debounce_s, self._reload, "config-watcher-debounce")
        self._started = False

    def start(self) -> "ConfigWatcher":
        if not self._started:
            self._started = True
            # Scheduled before the observer thread starts; afterwards only that thread reschedules, so
            # no lock is needed (and none could be held across its dispatch without risking deadlock).
            self._schedule(again=False)
            try:
                self._observer.start()
            except OSError as e:
                self.degraded = f"config watching unavailable ({e.strerror or e})"
        return self

    def close(self) -> None:
        _stop(self._observer, self._started)
        self._debouncer.close()

    def __enter__(self) -> "ConfigWatcher":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _schedule(self, again: bool = True) -> set[str]:
        """Each existing root (not recursive) and its config subdirectories (recursive); else the root's parent.

        Returns the relevant files already inside directories watched anew: written before their watch began
        (`mkdir -p .claude/agents && cp x.md .claude/agents/`), they would otherwise never be reported."""
        wanted: set[tuple[str, bool]] = set()
        for root in self.roots:
            if root.is_dir():
                wanted.add((str(root), False))
                wanted |= {(str(root / d), True) for d in CONFIG_SUBDIRS if (root / d).is_dir()}
            elif root.parent.is_dir():
                wanted.add((str(root.parent), False))  # to see the root being created
        for key in [k for k in self._watches if k not in wanted]:
            _unschedule(self._observer, self._watches.pop(key))
        present: set[str] = set()
        for key in sorted(wanted - self._watches.keys()):
            try:
                self._watches[key] = self._observer.schedule(self._handler, key[0], recursive=key[1],
                                                             event_filter=_CONFIG_EVENTS)
            except OSError as e:
                self.degraded = f"cannot watch {key[0]}: {e.strerror or e}"
                continue
            present |= {p for p in _files_in(key[0], key[1]) if self._relevant(Path(p))}
            # watchdog starts a new watch on its own thread: a file written before that thread's watch exists
            # and after the scan above is seen only by a second look
            if again:  # not at start: what is there then is configuration already loaded
                timer = threading.Timer(RESCAN_S, self._rescan, args=(key,))
                timer.daemon = True
                timer.start()
        return present

    def _rescan(self, key: tuple[str, bool]) -> None:
        if key in self._watches and (found := {p for p in _files_in(key[0], key[1]) if self._relevant(Path(p))}):
            self._debouncer.add(found)

    def _on_event(self, event: FileSystemEvent) -> None:
        paths = [Path(os.fsdecode(p)) for p in (event.src_path, event.dest_path) if p]
        relevant = {str(p) for p in paths if self._relevant(p)}
        if not relevant:
            return
        if event.is_directory:  # a root or config subdirectory appeared or went away
            relevant |= self._schedule()
        self._debouncer.add(relevant)

    def _relevant(self, path: Path) -> bool:
        for root in self.roots:
            if path == root:
                return True
            if root in path.parents:
                parts = path.relative_to(root).parts
                return parts[0] in CONFIG_SUBDIRS or (len(parts) == 1 and parts[0] in CONFIG_FILES)
        return False

    def _reload(self, paths: set[str]) -> None:
        try:
            self._on_reload(paths)
        except Exception as e:  # a broken settings file is the reloader's to report; keep watching
            self.errors.append(f"reload failed: {type(e).__name__}: {e}")


class _Handler(FileSystemEventHandler):
    def __init__(self, callback: Callable[[FileSystemEvent], None]) -> None:
        self._callback = callback

    def on_any_event(self, event: FileSystemEvent) -> None:
        self._callback(event)


class _Debouncer:
    """Collects items and calls fn(items) once no new item has arrived for `delay` seconds."""

    def __init__(self, delay: float, fn: Callable[[set[str]], None], name: str) -> None:
        self._delay = delay
        self._fn = fn
        self._pending: set[str] = set()
        self._last = 0.0
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def add(self, items: set[str]) -> None:
        with self._cond:
            self._pending |= items
            self._last = time.monotonic()
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(JOIN_TIMEOUT_S)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                while not self._closed and (left := self._last + self._delay - time.monotonic()) > 0:
                    self._cond.wait(left)
                if self._closed:
                    return
                batch, self._pending = self._pending, set()
            self._fn(batch)


def _stop(observer: Observer, started: bool) -> None:
    if started and observer.is_alive():
        observer.stop()
        if observer is not threading.current_thread():
            observer.join(JOIN_TIMEOUT_S)


def _unschedule(observer: Observer, watch) -> None:
    try:
        observer.unschedule(watch)
    except (KeyError, OSError):  # its directory was deleted and the watch is already gone
        pass


def _copy(source: Callable[[], ReadFiles]) -> dict[str, FileStamp]:
    """A copy of the live read_files dict; the agent's thread may be adding to it."""
    for _ in range(5):
        try:
            return dict(source())
        except RuntimeError:  # "changed size during iteration" (a mapping that is not a plain dict)
            continue
    return dict(source())


def _files_in(directory: str, recursive: bool) -> list[str]:
    """Files under directory (its subdirectories too when recursive); none when it is already gone."""
    found: list[str] = []
    for top, dirs, files in os.walk(directory):
        found += [os.path.join(top, f) for f in files]
        if not recursive:
            break
    return found


def file_stamp(path: str) -> FileStamp | None:
    """The file's stamp now; None when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return FileStamp(mtime_ns=st.st_mtime_ns, size=st.st_size)


def _display(path: str, cwd: Path) -> str:
    try:
        return str(Path(path).relative_to(cwd.resolve()))
    except ValueError:
        return path
