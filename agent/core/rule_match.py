"""How permission rules match: tool names, Bash command specifiers, path globs; the Decision they produce."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from agent.core.shell_parse import Part
from hooks.settings import SourcedRule

READ_TOOLS = frozenset({"Read", "Grep", "Glob", "LS", "NotebookRead"})


EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})


NO_PREFIX = frozenset({"rm", "sudo", "su", "doas", "sh", "bash", "zsh", "fish", "eval", "exec", "env", "xargs",
                       "python", "python3", "node", "perl", "ruby", "php", "curl", "wget", "ssh", "scp", "rsync",
                       "find", "kill", "pkill", "chmod", "chown", "dd", "mv", "cp", "ln", "cd", "tee", "touch",
                       "truncate", "mkdir", "install", "nc", "ncat", "socat", "telnet", "open", "xdg-open"})


# Assignments that change what a command runs or loads: an allow rule for the command does not cover them.
RISKY_ENV = re.compile(r"(PATH|LD_\w+|DYLD_\w+|BASH_ENV|ENV|IFS|PS4|PROMPT_COMMAND|SHELLOPTS|BASHOPTS|HOME|"
                       r"PYTHON\w*|NODE_OPTIONS|NODE_PATH|PERL5\w*|RUBY\w*|GIT_\w+|PAGER|EDITOR|VISUAL)\+?=")


@dataclass(frozen=True)
class Decision:
    behavior: str  # "allow" | "ask" | "deny"
    reason: str  # one short sentence for the user and the model
    rule: str | None = None  # the rule(s) that decided, comma-separated when several


@dataclass(frozen=True)
class _Rule:
    tool: str
    specifier: str | None  # None: the whole tool
    text: str
    source: str


def _parse_rule(sourced: SourcedRule) -> _Rule:
    text = sourced.rule.strip()
    name, paren, rest = text.partition("(")
    specifier = rest[:-1] if paren and rest.endswith(")") else None
    return _Rule(name.strip(), None if specifier in ("", "*") else specifier, text, sourced.source)


def _rule_reason(behavior: str, rule: _Rule, source: str, subject: str | None = None) -> str:
    verb = {"deny": "Denied", "ask": "Needs approval", "allow": "Allowed"}[behavior]
    return f"{verb} by rule {rule.text} ({source})" + (f": `{subject}`." if subject else ".")


def _covers(rule_tool: str, tool: str) -> bool:
    """Whether a rule's tool name applies to `tool` (Edit covers Write/MultiEdit, Read covers searches)."""
    if rule_tool == tool:
        return True
    if rule_tool == "Edit" and tool in EDIT_TOOLS or rule_tool == "Read" and tool in READ_TOOLS:
        return True
    if rule_tool.startswith("mcp__"):  # mcp__server and mcp__server__* cover the server's tools
        base = rule_tool.removesuffix("__*")
        return tool.startswith(base + "__") and base.count("__") == 1
    return False


def _bash_spec_matches(spec: str, command: str) -> bool:
    """Exact, legacy prefix (`npm run test:*`), or glob (`git diff *`; a lone trailing ` *` is optional)."""
    if spec.endswith(":*") and "*" not in spec[:-2].replace("\\*", ""):
        prefix = spec[:-2].replace("\\*", "*")
        return command == prefix or command.startswith(prefix + " ")
    pieces = re.split(r"(\\\*|\*)", spec)
    stars = sum(1 for piece in pieces if piece == "*")
    if stars == 0:
        return command == spec.replace("\\*", "*")
    regex = "".join(".*" if p == "*" else re.escape("*" if p == "\\*" else p) for p in pieces)
    if stars == 1 and spec.endswith(" *") and not spec.endswith("\\ *"):
        regex = regex[:-len(re.escape(" ") + ".*")] + "(?: .*)?"
    return re.fullmatch(regex, command, re.DOTALL) is not None


def _with_env(part: Part) -> str:
    return " ".join(part.env + [part.command]) if part.argv else part.command


def _suggested_command(part: Part) -> str:
    """`npm run test -- -k x` -> `npm run test:*`; the exact part when no subcommand words follow."""
    argv = part.argv
    subcommands = []
    for word in argv[1:3]:
        if not re.fullmatch(r"[a-z][a-z0-9_:-]*", word):
            break
        subcommands.append(word)
    if any(RISKY_ENV.match(e) for e in part.env):
        return _with_env(part).replace("*", "\\*")
    if argv and os.path.basename(argv[0]) not in NO_PREFIX and subcommands:
        prefix = " ".join(argv[:1 + len(subcommands)])
        if _bash_spec_matches(prefix + ":*", part.command) and "*" not in prefix:
            return prefix + ":*"
    return part.command.replace("*", "\\*")


def _expand(path: str) -> Path:
    try:
        return Path(path).expanduser()
    except RuntimeError:  # ~nosuchuser: the shell leaves it as written too
        return Path(path)


def _escape_glob(path: str) -> str:
    return re.sub(r"([*?\[])", r"\\\1", path)


def _path_matcher(spec: str, project_dir: Path):
    """A gitignore-style pattern: `//abs`, `~/home`, `/root-relative`, `./rel`; no slash = any depth."""
    if spec.startswith("//"):
        base, pattern, anchored = Path("/"), spec[2:], True
    elif spec == "~" or spec.startswith("~/"):
        base, pattern, anchored = Path.home(), spec[2:], True
    elif spec.startswith("/") or spec.startswith("./"):
        base, pattern, anchored = project_dir, spec[1:] if spec.startswith("/") else spec[2:], True
    else:
        base, pattern, anchored = project_dir, spec, "/" in spec.rstrip("/")
    pattern = pattern.rstrip("/")
    pattern = "" if pattern == "**" else pattern.removesuffix("/**")
    body, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            body, i = body + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            body, i = body + ".*", i + 2
        elif pattern[i] == "\\" and i + 1 < len(pattern):
            body, i = body + re.escape(pattern[i + 1]), i + 2
        elif pattern[i] == "*":
            body, i = body + "[^/]*", i + 1
        elif pattern[i] == "?":
            body, i = body + "[^/]", i + 1
        elif pattern[i] == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            body, i = body + "[" + pattern[i + 1:end].replace("!", "^", 1 if pattern[i + 1] == "!" else 0) + "]", end + 1
        else:
            body, i = body + re.escape(pattern[i]), i + 1
    root = re.escape(base.as_posix().rstrip("/"))
    if body:
        root += "/" + ("" if anchored else "(?:.*/)?") + body
    regex = re.compile(root + "(?:/.*)?", re.DOTALL)  # a matching directory covers what is inside it
    return lambda path: regex.fullmatch(Path(path).as_posix()) is not None
