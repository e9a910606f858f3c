"""File watching in a running session: stale-read notices for the model, configuration reloads.

StaleReads watches the files in ctx.read_files (agent.watch.FileWatcher, plus a stat sweep of up to
SWEEP_MAX files, which events can lag behind). Before each engine call, files that changed on disk since the agent last read or wrote them are named to the model in a
tail message (a user message marked <system-reminder>, so compaction never takes it for an
instruction); the Edit/Write tools already refuse a changed file until it is read again. Each change
is told once.

reload_config applies changed settings, hooks, skills, agents and commands to a running interactive
session (agent.watch.ConfigWatcher calls it, debounced). The tool list is left alone: it is part of
the cached prompt prefix, so a newly denied tool is refused by the permission check until the next
session instead. Headless runs (`agent -p`) are short and read the configuration once at start.
"""
from __future__ import annotations

import os
from typing import Callable

from agent.services.watch import FileWatcher, stale_notice
from tools.base import FileStamp

REMINDER_OPEN, REMINDER_CLOSE = "<system-reminder>", "</system-reminder>"
SWEEP_MAX = 500  # read files stat-checked before every engine call; beyond this, watchdog events only


class StaleReads:
    def __init__(self, agent, *, max_dirs: int = 64) -> None:
        self.agent = agent
        self.watcher = FileWatcher(lambda: agent.ctx.read_files, max_dirs=max_dirs).start()
        self.told: list[set[str]] = []  # what each notice named, for UIs and tests
        self._reported: set[str] = set()  # stale files already named (until read again)
        self._where: tuple[str, int] | None = None  # (session, epoch) the notices went to
        agent.before_query.append(self.before_query)

    def changed(self) -> set[str]:
        """Read files whose stamp no longer matches the disk. Up to SWEEP_MAX files are stat-checked
        directly, so a change made a moment ago (before its watchdog event arrived) is not missed."""
        files = dict(self.agent.ctx.read_files)
        found = self.watcher.stale()
        if len(files) <= SWEEP_MAX:
            found |= {p for p, stamp in files.items() if _stamp(p) != stamp}
        return found

    def before_query(self, agent, cancel) -> None:
        try:
            changed = self.changed()
        except Exception as e:  # watching is a help, not a reason to stop the run
            self.watcher.errors.append(f"stale check failed: {type(e).__name__}: {e}")
            return
        where = (agent.session.session_id, agent.session.epoch)
        if where != self._where:  # a rewind or compaction dropped earlier notices: tell again what is stale
            self._where, self._reported = where, set()
        new = changed - self._reported
        self._reported = (self._reported & changed) | new
        notice = stale_notice(new, agent.ctx.cwd)
        if notice:
            agent.session.append({"role": "user", "content": f"{REMINDER_OPEN}\n{notice}\n{REMINDER_CLOSE}"})
            self.told.append(set(new))

    def close(self) -> None:
        self.watcher.close()


def _stamp(path: str) -> FileStamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return FileStamp(mtime_ns=st.st_mtime_ns, size=st.st_size)


def reload_config(c, paths: set[str], notify: Callable[[str], None]) -> None:
    """Re-read settings (permissions, env, hooks) into the Interactive `c`; skills and commands are
    re-discovered by their users on the next look (c.config_generation tells them)."""
    from agent.cli import _load_settings, _permissions

    settings = _load_settings(c.project)
    for w in settings.warnings:
        notify(w)
    fresh = _permissions(settings, c.mode, c.project, c.options.allowed, c.options.disallowed)
    granted = {b: [r for r in rules if r.source == "session"] for b, rules in c.permissions.rules.items()}
    c.permissions.rules = {b: fresh.rules[b] + granted.get(b, []) for b in fresh.rules}
    c.permissions.dirs = fresh.dirs
    c.ctx.env.clear()
    c.ctx.env.update(settings.env)
    c.settings = settings
    if c.hooks is not None:
        c.agent.bus.unsubscribe(c.hook_bridge)
    c.hooks = c._attach_hooks(c.mode)
    c.config_generation += 1
    for listener in list(c.config_listeners):
        listener(paths)
    notify(f"Configuration reloaded ({_names(paths, c.project)}).")


def _names(paths: set[str], project) -> str:
    from pathlib import Path
    shown = []
    for p in sorted(paths):
        try:
            shown.append(str(Path(p).relative_to(project)))
        except ValueError:
            shown.append(p)
    return ", ".join(shown[:4]) + (f" and {len(shown) - 4} more" if len(shown) > 4 else "")
