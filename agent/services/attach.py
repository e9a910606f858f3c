"""One call that gives an Agent its session services: context budget and compaction, checkpoints,
stale-read notices, and (interactive only) configuration reloads. The CLI's headless mode and the
interactive core both use it, so the two behave alike.

Settings keys (read from the same files as hooks.settings, highest precedence first):
  autoCompactThreshold       0.8 (or 80): auto-compact past this share of the context window
  clearToolResultsThreshold  0.6: clear old tool results past this share
  autoCompact                false: never compact automatically (/compact still works)
  checkpoints                false: no snapshots (no /rewind, no `agent rewind`)
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from agent.services.checkpoint_recorder import CheckpointRecorder, checkpoints_for
from agent.services.compaction import ContextGuard
from agent.services.context_budget import budget_from_settings
from agent.services.stale_reads import StaleReads


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
                    warn: Callable[[str], None] | None = None, compact_threshold: float | None = None,
                    on_config_change: Callable[[set[str]], None] | None = None) -> Services:
    """notify: progress reports (compaction, clearing); warn: problems worth a line (checkpoints off)."""
    notify = notify or (lambda text: None)
    warn = warn or (lambda text: None)
    config, warnings = budget_from_settings(list(settings.sources), compact_threshold)
    for w in warnings:
        warn(w)
    guard = ContextGuard(agent, config, notify)
    recorder = None
    if setting(settings.sources, "checkpoints", True) is not False:
        store = checkpoints_for(project, warn)
        recorder = CheckpointRecorder(agent, store, warn) if store is not None else None
    try:
        stale = StaleReads(agent)
    except Exception as e:  # no inotify, no threads: the tools still refuse stale edits
        warn(f"warning: file watching is off: {type(e).__name__}: {e}")
        stale = None
    watcher = None
    if on_config_change is not None:
        from agent.services.watch import ConfigWatcher, config_roots
        watcher = ConfigWatcher(config_roots(project), on_config_change).start()
    return Services(guard, recorder, stale, watcher, warnings)


def setting(sources, key: str, default: object = None) -> object:
    """A top-level settings value from the highest-precedence file that has it."""
    for path in sources:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and key in data:
            return data[key]
    return default
