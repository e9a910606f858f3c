"""Settings files: permissions, hooks, env and model, merged across scopes.

Highest precedence first: `.agent/settings.local.json`, `.claude/settings.local.json`,
`.agent/settings.json`, `.claude/settings.json`, `<user_dir>/settings.json`,
`<claude_user_dir>/settings.json`. Permission rules and hooks are unions (each remembers
its file); env, model and defaultMode take the highest-precedence value. A broken file
becomes a one-line warning (and is listed in `broken`) and the rest still load. Unknown keys are ignored.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk")
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Notification",
               "Stop", "SubagentStop", "PreCompact", "SessionEnd")


@dataclass(frozen=True)
class SourcedRule:
    rule: str  # as written, e.g. "Bash(npm run test:*)"
    source: str  # the settings file it came from (or "--allowedTools", "session")


@dataclass
class PermissionSettings:
    allow: list[SourcedRule] = field(default_factory=list)
    ask: list[SourcedRule] = field(default_factory=list)
    deny: list[SourcedRule] = field(default_factory=list)
    default_mode: str | None = None
    additional_directories: list[Path] = field(default_factory=list)  # absolute


@dataclass
class HookGroup:
    matcher: str  # "" or "*" = every tool
    hooks: list[dict[str, Any]]  # raw entries: {"type": "command", "command": ..., "timeout": ...}
    source: str  # the settings file it came from


@dataclass
class Settings:
    permissions: PermissionSettings = field(default_factory=PermissionSettings)
    hooks: dict[str, list[HookGroup]] = field(default_factory=dict)  # event -> groups
    env: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    sources: list[Path] = field(default_factory=list)  # files actually read, highest precedence first
    warnings: list[str] = field(default_factory=list)  # one line each
    # Files that could not be read as a JSON object at all (also in warnings): their rules are missing, so a
    # headless run refuses to start (agent/session/builder.py) and a reload keeps the previous settings.
    broken: list[str] = field(default_factory=list)
    # Every other top-level key as the highest-precedence file has it: (value, that file). The agent's
    # typed Settings (agent/settings.py) parses these once; nothing re-reads the files.
    other: dict[str, tuple[Any, str]] = field(default_factory=dict)
    # mcpServers from every file, merged by server name (the highest-precedence file's entry wins): (entry, file).
    mcp_servers: dict[str, tuple[Any, str]] = field(default_factory=dict)
    # enabledMcpjsonServers / disabledMcpjsonServers: unions across files.
    mcp_enabled: list[str] = field(default_factory=list)
    mcp_disabled: list[str] = field(default_factory=list)


def settings_files(project_dir: Path, user_dir: Path | None = None,
                   claude_user_dir: Path | None = None) -> list[Path]:
    """Candidate settings files, highest precedence first (user dirs default to ~/.agent and ~/.claude; the
    CLI resolves AGENT_HOME and CLAUDE_CONFIG_DIR)."""
    user_dir = user_dir or Path.home() / ".agent"
    claude_user_dir = claude_user_dir or Path.home() / ".claude"
    project_dir = Path(project_dir)
    return [project_dir / ".agent" / "settings.local.json", project_dir / ".claude" / "settings.local.json",
            project_dir / ".agent" / "settings.json", project_dir / ".claude" / "settings.json",
            Path(user_dir) / "settings.json", Path(claude_user_dir) / "settings.json"]


def load_settings(project_dir: Path, user_dir: Path | None = None,
                  claude_user_dir: Path | None = None) -> Settings:
    """Read and merge every settings file that exists; never raises for a bad file."""
    project_dir = Path(project_dir).expanduser().resolve()
    settings = Settings()
    seen: set[Path] = set()
    for path in settings_files(project_dir, user_dir, claude_user_dir):
        real = path.expanduser().resolve()
        if real in seen or not real.exists():  # e.g. running in ~ makes project and user files one file
            continue
        seen.add(real)
        data = _read_json_object(path, settings.warnings)
        if data is None:
            settings.broken.append(settings.warnings[-1])
            continue
        settings.sources.append(path)
        _merge(settings, data, str(path), project_dir)
    return settings


def _read_json_object(path: Path, warnings: list[str]) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        warnings.append(f"settings: ignoring {path}: invalid JSON at line {e.lineno} column {e.colno} ({e.msg})")
        return None
    except (OSError, UnicodeDecodeError) as e:
        warnings.append(f"settings: ignoring {path}: cannot read it ({e.__class__.__name__}: {e})")
        return None
    if not isinstance(data, dict):
        warnings.append(f"settings: ignoring {path}: expected a JSON object, found {type(data).__name__}")
        return None
    return data


def _merge(settings: Settings, data: dict, source: str, project_dir: Path) -> None:
    """Fold one file (lower precedence than everything merged so far) into `settings`."""
    warn = settings.warnings.append
    permissions = data.get("permissions", {})
    if not isinstance(permissions, dict):
        warn(f"settings: {source}: 'permissions' must be an object; ignored")
        permissions = {}
    for kind in ("allow", "ask", "deny"):
        rules = permissions.get(kind, [])
        if not isinstance(rules, list):
            warn(f"settings: {source}: 'permissions.{kind}' must be a list of rules; ignored")
            continue
        for rule in rules:
            if not isinstance(rule, str) or not _valid_rule(rule):
                warn(f"settings: {source}: ignoring malformed permission rule {rule!r}")
                continue
            getattr(settings.permissions, kind).append(SourcedRule(rule.strip(), source))
    mode = permissions.get("defaultMode")
    if mode is not None and mode not in PERMISSION_MODES:
        warn(f"settings: {source}: unknown defaultMode {mode!r}; expected one of {', '.join(PERMISSION_MODES)}")
    elif mode is not None and settings.permissions.default_mode is None:
        settings.permissions.default_mode = mode
    directories = permissions.get("additionalDirectories", [])
    for directory in directories if isinstance(directories, list) else []:
        if isinstance(directory, str) and directory:
            path = Path(directory).expanduser()
            path = (path if path.is_absolute() else project_dir / path).resolve()
            if path not in settings.permissions.additional_directories:
                settings.permissions.additional_directories.append(path)

    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        warn(f"settings: {source}: 'hooks' must be an object; ignored")
        hooks = {}
    for event, groups in hooks.items():
        if event not in HOOK_EVENTS:
            warn(f"settings: {source}: hook event {event!r} is not supported here; ignored")
            continue
        for group in groups if isinstance(groups, list) else [groups]:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list) or not all(isinstance(h, dict) for h in entries):
                warn(f"settings: {source}: malformed {event} hook group; expected {{\"matcher\": ..., \"hooks\": [...]}}")
                continue
            matcher = group.get("matcher") or ""
            settings.hooks.setdefault(event, []).append(HookGroup(str(matcher), entries, source))

    env = data.get("env", {})
    if not isinstance(env, dict):
        warn(f"settings: {source}: 'env' must be an object; ignored")
        env = {}
    for name, value in env.items():
        if isinstance(value, (dict, list)) or value is None:
            warn(f"settings: {source}: env {name} must be a string; ignored")
        elif name not in settings.env:
            settings.env[name] = str(value).lower() if isinstance(value, bool) else str(value)

    model = data.get("model")
    if isinstance(model, str) and model and settings.model is None:
        settings.model = model

    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        warn(f"settings: {source}: 'mcpServers' must be an object; ignored")
        servers = {}
    for name, entry in servers.items():
        settings.mcp_servers.setdefault(name, (entry, source))
    for key, names in (("enabledMcpjsonServers", settings.mcp_enabled), ("disabledMcpjsonServers", settings.mcp_disabled)):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
            warn(f"settings: {source}: '{key}' must be a list of server names; ignored")
            continue
        names += [n for n in value if n not in names]

    for key, value in data.items():
        if key not in ("permissions", "hooks", "env", "model", "mcpServers", "enabledMcpjsonServers",
                       "disabledMcpjsonServers"):
            settings.other.setdefault(key, (value, source))


def _valid_rule(rule: str) -> bool:
    """`Tool` or `Tool(specifier)`, with a tool name of letters, digits, _ - * ."""
    rule = rule.strip()
    name, paren, rest = rule.partition("(")
    if paren and not rest.endswith(")"):
        return False
    return bool(name) and all(c.isalnum() or c in "_-*." for c in name)


def add_allow_rule(project_dir: Path, rule: str) -> Path:
    """Add `rule` to permissions.allow in `.agent/settings.local.json`, keeping everything else.

    Raises ValueError (one line) when the existing file is not a JSON object we can update
    (rather than overwriting what the user wrote) or cannot be read or written.
    """
    if not _valid_rule(rule):
        raise ValueError(f"not a permission rule: {rule!r}")
    path = Path(project_dir) / ".agent" / "settings.local.json"

    def change(data: dict) -> None:
        permissions = data.setdefault("permissions", {})
        if not isinstance(permissions, dict) or not isinstance(permissions.setdefault("allow", []), list):
            raise ValueError(f"{path} has a malformed 'permissions' entry")
        if rule not in permissions["allow"]:
            permissions["allow"].append(rule)
    try:
        update_json(path, change)
    except ValueError as e:
        raise ValueError(f"cannot add rule: {e}") from None
    return path


def update_json(path: Path, change: Callable[[dict], None]) -> None:
    """Read the object in `path` (or {}), apply `change`, write it back atomically; ValueError (one line) when it
    cannot (a file that is not a JSON object is never overwritten)."""
    data: dict = {}
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path} is not valid JSON ({e}); fix it first") from None
        except OSError as e:
            raise ValueError(f"cannot read {path} ({e.strerror or e})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path} is not a JSON object")
    change(data)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise ValueError(f"cannot write in {path.parent} ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException as e:
        os.unlink(tmp)
        if isinstance(e, OSError):
            raise ValueError(f"cannot write {path} ({e.strerror or e})") from None
        raise
