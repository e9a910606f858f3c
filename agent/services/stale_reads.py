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


from agent.core.model_text import system_reminder
from agent.services.watch import FileWatcher, file_stamp, stale_notice

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
            found |= {p for p, stamp in files.items() if file_stamp(p) != stamp}
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
            agent.session.append({"role": "user", "content": system_reminder(notice)})
            self.told.append(set(new))

    def close(self) -> None:
        self.watcher.close()

