"""Permission checks: may a tool call run, must the user be asked, or is it refused?

Rules use Claude Code's syntax (`Tool`, `Tool(specifier)`); deny beats ask beats allow across
every settings file and the CLI lists. Without a matching rule the mode decides:
  default            read-only tools inside the project run; edits, Bash and the rest ask
  acceptEdits        as default, plus file edits inside the project / additional dirs run
  plan               only read-only tools (and TodoWrite, Task, Skill, ExitPlanMode); the rest is denied
  bypassPermissions  everything runs except what a deny rule names
  dontAsk            as default, but whatever would ask is denied
Paths outside the project and additional dirs always ask unless a rule allows them.
Edits under .agent/, .claude/, .agents/ (settings, hooks, skills, commands, agents) and any .git/
(nested repositories too) are never auto-accepted: they change what the agent may do or what runs later.

Bash (bash_rules): every simple command of a compound must be allowed, one denied part denies the
whole, and deny rules also reach the commands run through shells, wrappers, find -exec and xargs.
Without a rule only SAFE_COMMANDS run, and only when their paths (globs and symlinks followed) stay
inside the project. Everything else asks, as in Claude Code.

"Always allow" rules (suggest_rule) are per part, never the whole compound: a prefix rule of the
command and its subcommand words (`npm run test -- -k x` -> `Bash(npm run test:*)`) when the
second word looks like a subcommand, else the exact part; never a prefix for commands in
NO_PREFIX (rm, sudo, interpreters, ...). Edits suggest `Edit(./dir/**)` for the file's directory
(the exact file at the project root or in a protected dir); outside reads `Read(//abs/dir/**)`.
"""
from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from agent.core.bash_rules import SAFE_COMMANDS, BashRules
from agent.core.rule_match import (READ_TOOLS, EDIT_TOOLS, Decision, _Rule, _parse_rule, _rule_reason, _covers,
                                   _suggested_command, _expand, _escape_glob, _path_matcher)
from agent.core.shell_parse import split_command
from hooks.settings import PERMISSION_MODES, PermissionSettings, SourcedRule

PATH_ARGS = {"Read": "file_path", "Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path",
             "NotebookEdit": "notebook_path", "NotebookRead": "notebook_path",
             "Grep": "path", "Glob": "path", "LS": "path"}
# Harness tools with no effect of their own (a subagent runs under the same checks and mode).
HARNESS_TOOLS = frozenset({"TodoWrite", "ExitPlanMode", "Task", "Skill"})
NETWORK_TOOLS = frozenset({"WebFetch", "WebSearch"})  # read-only, but they send data out: ask
SPECIFIER_ARGS = {"Task": "subagent_type", "Skill": "skill"}
# Never auto-accepted: they change what the agent may do or what runs later (any .git/, nested ones too).
_PROTECTED_DIRS = frozenset({".agent", ".claude", ".agents"})
__all__ = ["Decision", "Permissions", "SAFE_COMMANDS", "PERMISSION_MODES"]


class Permissions:
    def __init__(self, settings_permissions: PermissionSettings | None, mode: str | None, project_dir: Path,
                 additional_dirs=(), cli_allowed=(), cli_disallowed=(), sandbox: Any = None):
        """sandbox: the session's SandboxPolicy (or None): whether a command runs sandboxed, and auto-allow."""
        settings_permissions = settings_permissions or PermissionSettings()
        self.project_dir = Path(project_dir).expanduser().resolve()
        self.set_mode(mode or settings_permissions.default_mode or "default")
        extra = [self._absolute(str(d))[1] for d in additional_dirs]
        self.dirs = list(dict.fromkeys([self.project_dir, *settings_permissions.additional_directories, *extra]))
        self.rules: dict[str, list[_Rule]] = {
            "deny": [_parse_rule(r) for r in settings_permissions.deny]
            + [_parse_rule(SourcedRule(r, "--disallowedTools")) for r in cli_disallowed],
            "ask": [_parse_rule(r) for r in settings_permissions.ask],
            "allow": [_parse_rule(r) for r in settings_permissions.allow]
            + [_parse_rule(SourcedRule(r, "--allowedTools")) for r in cli_allowed]}
        self.sandbox = sandbox

    @property
    def bash(self) -> BashRules:
        return BashRules(self)  # built on use: a subagent's view (a copy with other rules and mode) gets its own

    def set_mode(self, mode: str) -> None:
        if mode not in PERMISSION_MODES:
            raise ValueError(f"unknown permission mode {mode!r}; expected one of {', '.join(PERMISSION_MODES)}")
        self.mode = mode

    def add_rule(self, rule: str, behavior: str = "allow", source: str = "session") -> None:
        """A rule granted at run time (e.g. "always allow" in the TUI)."""
        self.rules[behavior].append(_parse_rule(SourcedRule(rule, source)))

    def check(self, tool_name: str, args: dict, read_only: bool, *, cwd: Path | None = None) -> Decision:
        """Decide one call; `cwd` is Bash's current directory (ToolContext.shell_cwd), default the project."""
        if self.mode == "plan" and not read_only and tool_name not in HARNESS_TOOLS:
            return Decision("deny", f"Plan mode is on, so {tool_name} cannot run: only read-only tools may. "
                                    "Finish researching, then call ExitPlanMode with your plan for the user to approve.")
        if tool_name == "Bash":
            decision = self.bash.check(str(args.get("command") or ""), self._cwd(cwd))
        else:
            decision = self._check_tool(tool_name, args, read_only)
        if self.mode == "dontAsk" and decision.behavior == "ask":
            return Decision("deny", f"Refused in dontAsk mode (no rule allows it): {decision.reason}")
        return decision

    # ---- tools other than Bash

    def _check_tool(self, tool: str, args: dict, read_only: bool) -> Decision:
        paths = self._tool_paths(tool, args)
        for behavior in ("deny", "ask", "allow"):
            if behavior != "deny" and self.mode == "bypassPermissions":
                return Decision("allow", "Bypass mode: allowed without asking.")
            rule = next((r for r in self.rules[behavior] if self._tool_matches(r, tool, args, paths, behavior)), None)
            if rule:
                return Decision(behavior, _rule_reason(behavior, rule, self._show(rule.source)), rule.text)
        if tool in HARNESS_TOOLS:
            return Decision("allow", f"{tool} needs no permission.")
        outside = [resolved for _, resolved in paths if not self._inside(resolved)]
        if outside:
            return Decision("ask", f"{tool} of {outside[0]} is outside the project directory; it needs approval.")
        if tool in EDIT_TOOLS:
            where = self._show(str(paths[0][1])) if paths else "a file"
            if any(self._protected(resolved) for _, resolved in paths):
                return Decision("ask", f"{tool} of {where} changes agent settings, hooks or git internals; "
                                       "it needs approval.")
            if self.mode == "acceptEdits":
                return Decision("allow", f"acceptEdits mode: {tool} of {where} inside the project is allowed.")
            return Decision("ask", f"{tool} of {where} needs approval.")
        if read_only and tool not in NETWORK_TOOLS:
            return Decision("allow", f"{tool} is read-only and stays inside the project.")
        return Decision("ask", f"{tool} needs approval.")

    def _tool_matches(self, rule: _Rule, tool: str, args: dict, paths: list[tuple[Path, Path]], behavior: str) -> bool:
        if not _covers(rule.tool, tool):
            return False
        if rule.specifier is None:
            return True
        if tool in PATH_ARGS:
            matches = _path_matcher(rule.specifier, self.project_dir)
            if behavior == "allow":  # every path, symlinks resolved
                return bool(paths) and all(matches(resolved) for _, resolved in paths)
            return any(matches(p) for pair in paths for p in pair)
        if tool == "WebFetch" and rule.specifier.startswith("domain:"):
            domain = rule.specifier[len("domain:"):].lower()
            host = (urlparse(str(args.get("url", ""))).hostname or "").lower()
            return bool(host) and (fnmatch.fnmatchcase(host, domain) or host == domain or host.endswith("." + domain))
        if tool in SPECIFIER_ARGS:
            return fnmatch.fnmatchcase(str(args.get(SPECIFIER_ARGS[tool], "")), rule.specifier)
        return False

    def _tool_paths(self, tool: str, args: dict) -> list[tuple[Path, Path]]:
        """(lexical, resolved) absolute paths the call touches; search tools default to the project."""
        key = PATH_ARGS.get(tool)
        if key is None:
            return []
        value = args.get(key) or ("." if tool in READ_TOOLS else None)
        if value is None:
            return []
        paths = [self._absolute(str(value))]
        if tool == "Glob":  # a pattern like ../../**/*.py reaches beyond its path
            static = re.split(r"[*?\[{]", str(args.get("pattern", "")), maxsplit=1)[0]
            if "/" in static or static.startswith("~"):
                paths.append(self._absolute(os.path.join(str(value), os.path.dirname(static) or "/")))
        return paths

    def read_denied(self, path: Path) -> bool:
        """Whether a Read deny rule covers `path` (Grep leaves such files out of its results)."""
        rules = [r for r in self.rules["deny"] if r.tool == "Read" and r.specifier]
        resolved = Path(path).resolve()
        return any(_path_matcher(r.specifier, self.project_dir)(x) for r in rules for x in (Path(path), resolved))

    # ---- suggestions for "always allow"

    def suggest_rule(self, tool_name: str, args: dict, *, cwd: Path | None = None) -> list[str]:
        """Rules that "always allow" would store for this call: one per part still needing approval."""
        if tool_name == "Bash":
            split = split_command(str(args.get("command") or ""))
            if not split.ok:
                return []
            changes_dir = any(p.argv[:1] in (["cd"], ["pushd"], ["popd"]) for p in split.parts)
            rules: list[str] = []
            for part in split.parts:
                if any(self.bash.matches(r, part, "allow") for r in self.rules["allow"]) or (
                        not changes_dir and self.bash.is_safe(part, self._cwd(cwd))):
                    continue
                rule = f"Bash({_suggested_command(part)})"
                rules += [] if rule in rules else [rule]
            return rules
        if tool_name == "WebFetch":
            host = urlparse(str(args.get("url", ""))).hostname
            return [f"WebFetch(domain:{host})"] if host else ["WebFetch"]
        if tool_name not in PATH_ARGS:
            return [tool_name]
        family = "Edit" if tool_name in EDIT_TOOLS else "Read"
        paths = [resolved for _, resolved in self._tool_paths(tool_name, args)]
        outside = [path for path in paths if not self._inside(path)]
        rules = []
        for path in outside or paths:
            is_dir = tool_name in ("Grep", "Glob", "LS") or path.is_dir()
            exact = self._protected(path) or (not is_dir and path.parent == self.project_dir)
            target = path if exact or is_dir else path.parent
            if self._inside_project(target):  # "./src", or "." for the project itself
                shown = ("./" + target.relative_to(self.project_dir).as_posix()).removesuffix("/.")
            else:  # "//abs/dir", or "/" for the file system root
                shown = "/" + target.as_posix().rstrip("/")
            rule = f"{family}({_escape_glob(shown)})" if exact else f"{family}({_escape_glob(shown)}/**)"
            rules += [] if rule in rules else [rule]
        return rules

    # ---- paths

    def _absolute(self, value: str) -> tuple[Path, Path]:
        path = _expand(value)
        path = path if path.is_absolute() else self.project_dir / path
        return Path(os.path.normpath(path)), path.resolve()

    def _cwd(self, cwd: Path | None) -> Path:
        return self._absolute(str(cwd))[1] if cwd else self.project_dir

    def _inside(self, path: Path) -> bool:
        return any(path == d or d in path.parents for d in self.dirs)

    def _inside_project(self, path: Path) -> bool:
        return path == self.project_dir or self.project_dir in path.parents

    def _protected(self, path: Path) -> bool:
        """Agent settings, hooks, skills, commands and agents, or anything in a .git/ at any depth."""
        for root in self.dirs:
            if root in path.parents:
                parts = path.relative_to(root).parts
                if parts[0] in _PROTECTED_DIRS or ".git" in parts:
                    return True
        return False

    def _show(self, path: str) -> str:
        p = Path(path)
        if not p.is_absolute():
            return path
        if self._inside_project(p):
            return p.relative_to(self.project_dir).as_posix() or "."
        home = Path.home()
        return "~/" + p.relative_to(home).as_posix() if home in p.parents else path


