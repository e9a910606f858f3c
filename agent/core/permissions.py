"""Permission checks: may a tool call run, must the user be asked, or is it refused?

Rules use Claude Code's syntax (`Tool`, `Tool(specifier)`); deny beats ask beats allow across
every settings file and the CLI lists. Without a matching rule the mode decides:
  default            read-only tools inside the project run; edits, Bash and the rest ask
  acceptEdits        as default, plus file edits inside the project / additional dirs run
  plan               only read-only tools (and TodoWrite, Task, Skill, ExitPlanMode); the rest is denied
  bypassPermissions  everything runs except what a deny rule names
  dontAsk            as default, but whatever would ask is denied
Paths outside the project and additional dirs always ask unless a rule allows them.
Edits under .git/, .agent/ and .claude/ (except their skills/, agents/, commands/) are never
auto-accepted: they change hooks and permissions.

Bash: every simple command of a compound (see shell_split) must be allowed; one denied part
denies the whole; an unparseable command asks. Without a rule only SAFE_COMMANDS run, and only
when their path arguments stay inside the project, they have no env assignments, no redirection
other than to /dev/null or an fd, no `$`/backquote/brace expansion, and no `cd` anywhere in the
command. Everything else asks, as in Claude Code.

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
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from agent.core.rule_match import (READ_TOOLS, EDIT_TOOLS, RISKY_ENV, _Rule, _parse_rule, _rule_reason, _covers, _bash_spec_matches, _unwrapped, _with_nested_shells, _with_env, _suggested_command, _expand, _escape_glob, _path_matcher)
from agent.core.shell_split import Part, split_command
from hooks.settings import PERMISSION_MODES, PermissionSettings, SourcedRule

PATH_ARGS = {"Read": "file_path", "Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path",
             "NotebookEdit": "notebook_path", "NotebookRead": "notebook_path",
             "Grep": "path", "Glob": "path", "LS": "path"}
# Harness tools with no effect of their own (a subagent runs under the same checks and mode).
HARNESS_TOOLS = frozenset({"TodoWrite", "ExitPlanMode", "Task", "Skill"})
NETWORK_TOOLS = frozenset({"WebFetch", "WebSearch"})  # read-only, but they send data out: ask
SPECIFIER_ARGS = {"Task": "subagent_type", "Skill": "skill"}
# No git: a repository's own config (core.fsmonitor, diff drivers, pager) can make `git status` run code.
SAFE_COMMANDS = frozenset({"pwd", "ls", "cat", "head", "tail", "wc", "grep", "echo"})
_PROTECTED_EXCEPTIONS = frozenset({"skills", "agents", "commands"})


@dataclass(frozen=True)
class Decision:
    behavior: str  # "allow" | "ask" | "deny"
    reason: str  # one short sentence for the user and the model
    rule: str | None = None  # the rule(s) that decided, comma-separated when several


class Permissions:
    def __init__(self, settings_permissions: PermissionSettings | None, mode: str | None, project_dir: Path,
                 additional_dirs=(), cli_allowed=(), cli_disallowed=()):
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
            decision = self._check_bash(str(args.get("command") or ""), self._cwd(cwd))
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

    # ---- Bash

    def _check_bash(self, command: str, cwd: Path) -> Decision:
        split = split_command(command)
        parts = _with_nested_shells(split.parts)
        for rule in self.rules["deny"]:
            part = next((p for p in parts if self._bash_matches(rule, p, "deny")), None)
            if _covers(rule.tool, "Bash") and (rule.specifier is None or part):
                subject = part.command if part and rule.specifier else None
                return Decision("deny", _rule_reason("deny", rule, self._show(rule.source), subject), rule.text)
        if self.mode == "bypassPermissions":
            if split.ok or not any(r.tool == "Bash" and r.specifier for r in self.rules["deny"]):
                return Decision("allow", "Bypass mode: allowed without asking.")
            return Decision("ask", f"The command could not be parsed with confidence ({split.problem}), "
                                   "so deny rules cannot be checked; it needs approval.")
        for rule in self.rules["ask"]:
            part = next((p for p in parts if self._bash_matches(rule, p, "ask")), None)
            if _covers(rule.tool, "Bash") and (rule.specifier is None or part):
                subject = part.command if part and rule.specifier else None
                return Decision("ask", _rule_reason("ask", rule, self._show(rule.source), subject), rule.text)
        whole = next((r for r in self.rules["allow"] if _covers(r.tool, "Bash") and r.specifier is None), None)
        if whole:
            return Decision("allow", _rule_reason("allow", whole, self._show(whole.source)), whole.text)
        if not split.ok:
            return Decision("ask", f"The command could not be parsed with confidence ({split.problem}); "
                                   "it needs approval.")
        if not split.parts:
            return Decision("allow", "The command is empty.")
        used: list[str] = []
        pending: list[str] = []
        changes_dir = any(p.argv[:1] in (["cd"], ["pushd"], ["popd"]) for p in split.parts)
        for part in split.parts:
            rule = next((r for r in self.rules["allow"] if self._bash_matches(r, part, "allow")), None)
            if rule:
                used += [] if rule.text in used else [rule.text]
            elif changes_dir or not self._is_safe(part, cwd):
                pending.append(f"`{part.command}`")
        if pending:
            return Decision("ask", f"Bash command needs approval: {'; '.join(pending)}.")
        if used:
            return Decision("allow", f"Allowed by {', '.join(used)}.", ", ".join(used))
        return Decision("allow", "Read-only command inside the project.")

    def _bash_matches(self, rule: _Rule, part: Part, behavior: str) -> bool:
        if not _covers(rule.tool, "Bash") or rule.specifier is None:
            return False
        if behavior == "allow":  # as written; a risky assignment must be part of the rule itself
            forms = [_with_env(part) if any(RISKY_ENV.match(e) for e in part.env) else part.command]
        else:  # deny and ask also see through quoting, wrappers and /bin/ paths
            forms = [part.command, _with_env(part), *_unwrapped(part.argv)]
        return any(_bash_spec_matches(rule.specifier, form) for form in forms)

    def _is_safe(self, part: Part, cwd: Path) -> bool:
        """A SAFE_COMMANDS part that reads nothing outside the allowed dirs and writes nothing."""
        if part.env or not part.argv or part.argv[0] not in SAFE_COMMANDS or not self._inside(cwd):
            return False
        for op, target in part.redirects:
            dup = op.endswith("&") and re.fullmatch(r"\d+|-", target)
            if not (dup or (target == "/dev/null" and ">" in op) or (op.lstrip("0123456789") == "<"
                                                                      and self._safe_path(target, cwd))):
                return False
        if part.argv[0] == "echo":
            return not any(c in arg for arg in part.argv for c in "$`")
        for arg in part.argv[1:]:
            value = arg.partition("=")[2] if arg.startswith("-") else arg
            if (value or not arg.startswith("-")) and not self._safe_path(value, cwd):
                return False
        return True

    def _safe_path(self, arg: str, cwd: Path) -> bool:
        if any(c in arg for c in "$`{") or any(seg.startswith(".") and any(g in seg for g in "*?[")
                                               for seg in arg.split("/")):
            return False  # expansions we cannot follow (`.*` may reach `..`)
        path = _expand(arg)
        return self._inside((path if path.is_absolute() else cwd / path).resolve())

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
                if any(self._bash_matches(r, part, "allow") for r in self.rules["allow"]) or (
                        not changes_dir and self._is_safe(part, self._cwd(cwd))):
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
        for root in self.dirs:
            if root in path.parents:
                parts = path.relative_to(root).parts
                if parts[0] == ".git" or (parts[0] in (".agent", ".claude")
                                          and (len(parts) < 3 or parts[1] not in _PROTECTED_EXCEPTIONS)):
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


