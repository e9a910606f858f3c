"""Everything the agent reads from settings files and environment variables, parsed once at the edge.

The CLI builds an Environment (from os.environ) and Settings (from the settings files) and passes
them down; nothing below it reads a settings file or an environment variable.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from hooks.settings import HookGroup, PermissionSettings, load_settings
from runtime.options import RuntimeOptions

from agent.core.sandbox_policy import SandboxSettings, sandbox_from_settings
from agent.mcp.config import McpSettings
from agent.paths import Locations
from agent.services.context_budget import BudgetConfig, budget_from_settings


@dataclass(frozen=True)
class Environment:
    """The environment variables the agent reads (the runtime's own come through RuntimeOptions)."""
    locations: Locations
    api_key: str | None = None  # AGENT_API_KEY or OPENAI_API_KEY, for --engine openai
    subagent_max_depth: int = 2  # AGENT_SUBAGENT_MAX_DEPTH
    subagent_max_concurrent: int = 4  # AGENT_SUBAGENT_MAX_CONCURRENT
    debug: bool = False  # AGENT_DEBUG: tracebacks for unexpected errors
    runtime: RuntimeOptions = field(default_factory=RuntimeOptions)  # AGENT_DEVICE, AGENT_THREADS, AGENT_CACHE_DIR, ...
    warnings: tuple[str, ...] = ()
    # The whole environment, for what passes it on: MCP servers' processes and ${VAR} in their configuration.
    variables: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    mcp_startup_timeout_s: float = 30.0  # MCP_TIMEOUT (milliseconds, as Claude Code reads it)
    mcp_tool_timeout_s: float = 120.0  # MCP_TOOL_TIMEOUT (milliseconds)

    @classmethod
    def current(cls) -> "Environment":
        """This process's environment (for clients built without the CLI: tests, embedding)."""
        return cls.from_env(os.environ)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "Environment":
        warnings, limits = [], {}
        for name, low, default in (("AGENT_SUBAGENT_MAX_DEPTH", 0, 2), ("AGENT_SUBAGENT_MAX_CONCURRENT", 1, 4)):
            raw = environ.get(name) or ""
            if raw and (not raw.strip().isdigit() or int(raw) < low):
                warnings.append(f"{name} must be an integer >= {low}, got {raw!r}; using the defaults")
                raw = ""
            limits[name] = int(raw) if raw else default
        for name, default in (("MCP_TIMEOUT", 30_000), ("MCP_TOOL_TIMEOUT", 120_000)):
            raw = (environ.get(name) or "").strip()
            if raw and (not raw.isdigit() or int(raw) < 1):
                warnings.append(f"{name} must be a number of milliseconds, got {raw!r}; using {default}")
                raw = ""
            limits[name] = (int(raw) if raw else default) / 1000
        try:
            runtime = RuntimeOptions.from_env(environ)
        except ValueError as e:
            warnings.append(f"{e}; using the runtime's defaults")
            runtime = RuntimeOptions()
        return cls(Locations.from_env(environ), environ.get("AGENT_API_KEY") or environ.get("OPENAI_API_KEY"),
                   limits["AGENT_SUBAGENT_MAX_DEPTH"], limits["AGENT_SUBAGENT_MAX_CONCURRENT"],
                   bool(environ.get("AGENT_DEBUG")), runtime, tuple(warnings), dict(environ),
                   limits["MCP_TIMEOUT"], limits["MCP_TOOL_TIMEOUT"])


@dataclass
class Settings:
    """Every settings key the project reads (FORMATS.md), merged across files, highest precedence first."""
    permissions: PermissionSettings = field(default_factory=PermissionSettings)
    hooks: dict[str, list[HookGroup]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # extra environment for Bash and hooks
    model: str | None = None
    speculation: bool = True  # "speculation": false turns speculative decoding off
    constrained_tools: bool = True  # "constrainedTools": false lets the model write calls unconstrained
    checkpoints: bool = True  # "checkpoints": false takes no snapshots
    budget: BudgetConfig = field(default_factory=BudgetConfig)  # autoCompactThreshold, clearToolResultsThreshold, autoCompact
    model_profile: str | dict | None = None  # "modelProfile": a profile name or {name?, field: value}
    tries: int | None = None  # "tries": candidates per retried edit step (None: the profile's)
    mcp: McpSettings = field(default_factory=McpSettings)  # mcpServers, enabled/disabledMcpjsonServers, enableAll...
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)  # "sandbox": Claude Code's block
    sources: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)  # files not read at all (also in warnings): their rules are missing

    @classmethod
    def load(cls, project: Path, locations: Locations, *, compact_at: float | None = None) -> "Settings":
        """The settings files of `project` and the user; a bad file or value is a warning, never an exception."""
        raw = load_settings(project, locations.agent_home, locations.claude_home)
        out = cls(raw.permissions, raw.hooks, raw.env, raw.model, sources=list(raw.sources),
                  warnings=list(raw.warnings), broken=list(raw.broken))
        other = raw.other
        out.mcp = McpSettings(raw.mcp_servers, raw.mcp_enabled, raw.mcp_disabled)
        for key, attr in (("speculation", "speculation"), ("constrainedTools", "constrained_tools"),
                          ("checkpoints", "checkpoints"), ("enableAllProjectMcpServers", "enable_all_project")):
            value, source = other.get(key, (None, ""))
            if isinstance(value, bool):
                setattr(out.mcp if attr == "enable_all_project" else out, attr, value)
            elif value is not None:
                out.warnings.append(f"settings: {source}: {key} must be true or false; ignored")
        out.budget, warnings = budget_from_settings(other, compact_at)
        out.warnings += warnings
        tries, source = other.get("tries", (None, ""))
        if tries is not None and (not isinstance(tries, int) or isinstance(tries, bool) or not 1 <= tries <= 16):
            out.warnings.append(f"settings: {source}: tries must be a whole number from 1 to 16; ignored")
        else:
            out.tries = tries
        out.sandbox, warnings = sandbox_from_settings(other)
        out.warnings += warnings
        profile, source = other.get("modelProfile", (None, ""))
        if profile is not None and not isinstance(profile, (str, dict)):
            out.warnings.append(f"settings: {source}: modelProfile must be a profile name or an object; ignored")
        else:
            out.model_profile = profile
        return out

