"""One call that gives an Agent its session services: context budget and compaction, checkpoints,
stale-read notices, and (interactive only) configuration reloads. Every session is built with it
(agent.session.builder), so headless and interactive sessions behave alike."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from agent.services.checkpoint_recorder import CheckpointRecorder, checkpoints_for
from agent.services.compaction import ContextGuard
from agent.services.stale_reads import StaleReads
from agent.services.watch import ConfigWatcher


@dataclass
class Services:
    guard: ContextGuard
    checkpoints: CheckpointRecorder | None
    stale: StaleReads | None
    config_watcher: object | None = None
    warnings: list[str] = field(default_factory=list)

    def close(self) -> None:
        for w in (self.stale, self.config_watcher):
            if w is not None:
                w.close()


def attach_services(agent, project: Path, settings, *, notify: Callable[[str], None] | None = None,
                    warn: Callable[[str], None] | None = None, config_roots: list[Path] | None = None,
                    on_config_change: Callable[[set[str]], None] | None = None) -> Services:
    """settings: agent.settings.Settings (budget, checkpoints); notify: progress reports (compaction,
    clearing); warn: problems worth a line (checkpoints off); config_roots + on_config_change: reloads."""
    notify = notify or (lambda text: None)
    warn = warn or (lambda text: None)
    config, warnings = settings.budget, []
    guard = ContextGuard(agent, config, notify)
    recorder = None
    if settings.checkpoints:
        store = checkpoints_for(project, warn)
        recorder = CheckpointRecorder(agent, store, warn) if store is not None else None
    try:
        stale = StaleReads(agent)
    except Exception as e:  # no inotify, no threads: the tools still refuse stale edits
        warn(f"warning: file watching is off: {type(e).__name__}: {e}")
        stale = None
    watcher = None
    if on_config_change is not None:
        watcher = ConfigWatcher(config_roots or [], on_config_change).start()
    return Services(guard, recorder, stale, watcher, warnings)

