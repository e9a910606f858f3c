"""The session's Bash sandbox: the `sandbox` settings block (Claude Code's shape), `--sandbox on|off|auto`,
which commands run inside bubblewrap and what the sandbox hides, keeps read-only and lets through.

  {"sandbox": {"enabled": true, "autoAllowBashIfSandboxed": true, "excludedCommands": ["docker:*"],
               "network": {"allowedDomains": ["*"]}, "filesystem": {"allowWrite": [...], "denyRead": [...]}}}

Modes: off (no sandbox); on (every Bash command sandboxed, the rules ask as usual); auto (sandboxed, and a
sandboxed command runs without a prompt: autoAllowBashIfSandboxed). `enabled: true` means auto unless
autoAllowBashIfSandboxed is false. Where bubblewrap cannot run the session says so once and keeps the
rules. Per-domain network filtering needs a proxy we do not ship: only `"*"` opens the network.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools._sandbox import Bubblewrap, SandboxLayout

from agent.core.rule_match import _bash_spec_matches, _path_matcher
from agent.core.shell_parse import split_command

SANDBOX_MODES = ("on", "off", "auto")
# Read by nothing a build needs, worth the most to someone who gets a shell: hidden inside the sandbox.
SECRET_HOME_PATHS = (".ssh", ".aws", ".gnupg", ".netrc", ".git-credentials", ".pgpass", ".kube", ".docker",
                     ".config/gcloud", ".config/gh", ".azure")
_PROTECTED_IN_PROJECT = (".agent", ".claude", ".agents", ".git/hooks", ".git/config")
_HIDE_WALK_LIMIT = 20_000


@dataclass(frozen=True)
class SandboxSettings:
    mode: str = "off"
    excluded: tuple[str, ...] = ()  # excludedCommands: Bash rule specifiers run outside the sandbox
    network: bool = False  # network.allowedDomains contains "*"
    allow_write: tuple[str, ...] = ()  # filesystem.allowWrite
    deny_read: tuple[str, ...] = ()  # filesystem.denyRead


def sandbox_from_settings(other: dict[str, tuple[Any, str]]) -> tuple[SandboxSettings, list[str]]:
    """The `sandbox` block parsed once; a bad value is a warning and the safe default."""
    value, source = other.get("sandbox", (None, ""))
    if value is None:
        return SandboxSettings(), []
    if not isinstance(value, dict):
        return SandboxSettings(), [f"settings: {source}: sandbox must be an object; ignored"]
    warnings: list[str] = []

    def flag(key: str, default: bool) -> bool:
        v = value.get(key, default)
        if not isinstance(v, bool):
            warnings.append(f"settings: {source}: sandbox.{key} must be true or false; using {str(default).lower()}")
            return default
        return v

    def strings(container: dict, key: str, where: str) -> tuple[str, ...]:
        v = container.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            warnings.append(f"settings: {source}: {where}{key} must be a list of strings; ignored")
            return ()
        return tuple(v)

    enabled, auto = flag("enabled", False), flag("autoAllowBashIfSandboxed", True)
    network = value.get("network", {})
    filesystem = value.get("filesystem", {})
    network = network if isinstance(network, dict) else {}
    filesystem = filesystem if isinstance(filesystem, dict) else {}
    domains = strings(network, "allowedDomains", "sandbox.network.")
    if domains and "*" not in domains:
        warnings.append(f"settings: {source}: sandbox.network.allowedDomains: per-domain filtering is not "
                        "supported here; the network stays off inside the sandbox (\"*\" turns it on)")
    return SandboxSettings("off" if not enabled else "auto" if auto else "on",
                           strings(value, "excludedCommands", "sandbox."), "*" in domains,
                           strings(filesystem, "allowWrite", "sandbox.filesystem."),
                           strings(filesystem, "denyRead", "sandbox.filesystem.")), warnings


@dataclass
class SandboxPolicy:
    """Which Bash commands run in bubblewrap and how; handed to the Bash tool and to Permissions."""
    settings: SandboxSettings
    project: Path
    dirs: tuple[Path, ...] = ()  # writable: the project and additional dirs
    permissions: Any = None  # the session's Permissions: its live Read/Edit deny rules are hidden / read-only inside
    home: Path = field(default_factory=Path.home)
    bwrap: Bubblewrap = field(default_factory=Bubblewrap)
    active: bool = False  # the mode asks for it and bubblewrap runs here

    def start(self) -> str | None:
        """Probe bubblewrap; the one-line notice when the mode wants a sandbox it cannot have."""
        if self.settings.mode == "off":
            return None
        ok, why = self.bwrap.available()
        self.active = ok
        return None if ok else f"sandbox: {why}; Bash runs without it, under the permission rules only"

    @property
    def auto_allow(self) -> bool:
        return self.active and self.settings.mode == "auto"

    def sandboxed(self, command: str) -> bool:
        """Whether `command` runs inside the sandbox (not when a part matches excludedCommands)."""
        if not self.active:
            return False
        parts = split_command(command).parts
        return not any(_bash_spec_matches(spec, form) for spec in self.settings.excluded for part in parts
                       for form in (part.command, " ".join(part.argv)))

    def wrap(self, command: str, argv: list[str], cwd: Path, keep: tuple[str, ...] = ()) -> list[str]:
        """argv as it runs: inside bubblewrap when sandboxed, else unchanged (the Bash tool's seam)."""
        if not self.sandboxed(command):
            return argv
        return self.bwrap.wrap(argv, cwd, self.layout(), keep)

    def layout(self) -> SandboxLayout:
        writable = [*self.dirs, *(Path(os.path.expanduser(p)).resolve() for p in self.settings.allow_write)]
        read_only = [d / p for d in self.dirs for p in _PROTECTED_IN_PROJECT]
        read_only += self._matching(self._deny_specs("Edit"))
        hidden = [(self.home / p).resolve() for p in SECRET_HOME_PATHS]
        hidden += [parent / name for parent in self.project.parents for name in (".env", ".env.local")]
        hidden += self._matching(self._deny_specs("Read") + self.settings.deny_read)
        absent = tuple(d / name for d in self.dirs for name in (".agent", ".claude", ".agents"))
        # A mount inside a hidden (read-only, empty) directory cannot be made, and is not needed.
        hidden = [h for h in dict.fromkeys(hidden) if h.exists()]
        covered = [h for h in hidden if h.is_dir()]
        hidden = [h for h in hidden if not any(c in h.parents for c in covered)]
        read_only = [r for r in dict.fromkeys(read_only) if not any(c == r or c in r.parents for c in covered)]
        return SandboxLayout(writable=tuple(writable), hidden=tuple(hidden), read_only=tuple(read_only),
                             absent_read_only=absent, network=self.settings.network)

    def _deny_specs(self, tool: str) -> tuple[str, ...]:
        rules = self.permissions.rules["deny"] if self.permissions is not None else []
        return tuple(r.specifier for r in rules if r.tool == tool and r.specifier)

    def _matching(self, specs: tuple[str, ...]) -> list[Path]:
        """Existing paths deny specifiers cover: anchored ones directly, patterns by a bounded walk of the dirs."""
        found: list[Path] = []
        for spec in specs:
            matches = _path_matcher(spec, self.project)
            plain = not any(c in spec.removesuffix("/**") for c in "*?[")
            if plain and (spec.startswith(("/", "./", "~")) or "/" in spec.rstrip("/")):
                base = spec.removesuffix("/**")
                path = Path("/" + base[2:]) if base.startswith("//") else Path(os.path.expanduser(base)) \
                    if base.startswith("~") else self.project / base.lstrip("/").removeprefix("./")
                found.append(path.resolve())
                continue
            count = 0
            for root in self.dirs:
                for dirpath, dirnames, filenames in os.walk(root):
                    for name in dirnames + filenames:
                        count += 1
                        path = Path(dirpath) / name
                        if matches(path):
                            found.append(path.resolve())
                    dirnames[:] = [d for d in dirnames if not matches(Path(dirpath) / d)]
                    if count > _HIDE_WALK_LIMIT:
                        break
        return found
