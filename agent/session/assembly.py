"""The parts a session is assembled from that are rebuilt when the configuration changes: the offered
tools, the permission rules and the hooks (used by the builder and by SessionCore.reload_config)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

import tools as builtin
from hooks.runner import HookRunner

from agent.core.permissions import Permissions
from agent.core.sandbox_policy import SandboxPolicy
from agent.harness.tools import harness_tools, offered_order
from agent.services.hook_bridge import HookBridge
from agent.settings import Settings


def offered_tools(deny_rules: list[str]) -> list:
    """The built-in and harness tools minus those denied outright (a bare name), so the model is not offered them."""
    denied = {r for r in deny_rules if "(" not in r}
    if "Bash" in denied:  # no background shells to read or stop
        denied |= {"BashOutput", "KillShell"}
    return offered_order([t for t in builtin.builtin_tools() + harness_tools() if t.name not in denied])


def make_permissions(settings: Settings, mode: str, project: Path, allowed: list[str],
                     disallowed: list[str], sandbox: SandboxPolicy | None = None) -> Permissions:
    return Permissions(settings.permissions, mode, project,
                       additional_dirs=tuple(settings.permissions.additional_directories),
                       cli_allowed=tuple(allowed), cli_disallowed=tuple(disallowed), sandbox=sandbox)


def make_sandbox(settings: Settings, mode: str | None, permissions: Permissions, tools: list,
                 warn: Callable[[str], None]) -> SandboxPolicy:
    """The session's sandbox (--sandbox beats the settings), wired into Permissions and the Bash tool; where
    bubblewrap cannot run, one line says so and the rules alone apply."""
    sandbox_settings = replace(settings.sandbox, mode=mode) if mode else settings.sandbox
    policy = SandboxPolicy(sandbox_settings, permissions.project_dir, tuple(permissions.dirs), permissions=permissions)
    notice = policy.start()
    if notice:
        warn(notice)
    permissions.sandbox = policy
    for tool in tools:
        if tool.name == "Bash":
            tool.sandbox = policy
    return policy


def attach_hooks(agent, settings: Settings, project: Path, mode: str,
                 notify: Callable[[str], None]) -> tuple[HookRunner | None, HookBridge | None]:
    """The settings' hooks on the agent's bus; (None, None) when there are none."""
    if not settings.hooks:
        return None, None
    config = {event: [{"matcher": g.matcher, "hooks": g.hooks, "source": g.source} for g in groups]
              for event, groups in settings.hooks.items()}
    runner = HookRunner(config, project, agent.session.session_id, str(agent.session.transcript_path),
                        env=dict(settings.env))
    for w in runner.warnings:
        notify(w)
    bridge = HookBridge(runner, mode, notify=notify)
    agent.bus.subscribe(bridge)
    return runner, bridge
