"""The commands a command runs on behalf of its words: `sh -lc '...'`, `bash <<< '...'`, `echo ... | bash`,
`eval`, `env`/`nice`/`setsid`/`timeout`/`sudo`..., `find -exec`, `xargs`; and git with its global options
(`git -C dir -c k=v --no-pager push` -> `git push`).

Deny and ask rules, write-target checks and Read deny checks apply to these inner commands as to
the outer one. What we cannot see into (a shell reading an unknown pipe or a file of commands fed on
stdin, a dynamic `-c` string) is reported as a problem so the caller asks.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from agent.core.shell_parse import Part, split_command

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox"})
# wrapper -> options that take a value (every other `-x` is a flag)
WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T"}), "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "--unset", "--chdir"}), "nice": frozenset({"-n", "--adjustment"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}), "setsid": frozenset(), "nohup": frozenset(),
    "time": frozenset({"-f", "-o", "--format", "--output"}), "command": frozenset(), "builtin": frozenset(),
    "exec": frozenset({"-a"}), "stdbuf": frozenset({"-i", "-o", "-e"}), "ionice": frozenset({"-c", "-n"}),
    "chrt": frozenset(), "taskset": frozenset(), "unbuffer": frozenset(), "caffeinate": frozenset(),
    "xargs": frozenset({"-I", "-L", "-n", "-P", "-d", "-E", "-s", "-a", "--arg-file", "--delimiter",
                        "--max-args", "--max-procs", "--replace", "--max-lines", "--eof"}),
    "flock": frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}), "watch": frozenset({"-n", "-d"}),
    "chroot": frozenset({"--userspec", "--groups"}), "runuser": frozenset({"-u", "-g"}),
}
# A wrapper's first plain word that is not yet the command: timeout's duration, taskset's mask, ...
_LEADING_VALUE = {"timeout": 1, "chrt": 1, "taskset": 1, "flock": 1, "chroot": 1}
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_GIT_VALUE_OPTIONS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path",
                                "--super-prefix", "--config-env"})


@dataclass
class Unwrapped:
    parts: list[Part] = field(default_factory=list)  # the outer parts and every command they run, outermost first
    problem: str = ""


def expand(parts: list[Part], depth: int = 0) -> Unwrapped:
    """`parts` plus the commands they run through wrappers, shells, eval, find -exec and xargs."""
    out = Unwrapped()
    for part in parts:
        out.parts.append(part)
        for inner, problem in _inner(part, depth):
            out.problem = out.problem or problem
            if inner:
                nested = expand(inner, depth + 1)
                out.parts += nested.parts
                out.problem = out.problem or nested.problem
    return out


def git_normalized(argv: list[str]) -> list[str] | None:
    """`git -C d -c k=v --no-pager push x` -> `git push x`; None when argv is not git with global options."""
    if not argv or os.path.basename(argv[0]) != "git":
        return None
    words, i = ["git"], 1
    while i < len(argv) and argv[i].startswith("-"):
        option = argv[i].split("=", 1)[0]
        i += 2 if option in _GIT_VALUE_OPTIONS and "=" not in argv[i] else 1
    if i == 1:
        return None
    return words + argv[i:]


def _inner(part: Part, depth: int) -> list[tuple[list[Part], str]]:
    """The commands one part runs as lists of parts, each with a problem ('' when we could read it)."""
    argv = list(part.argv)
    if not argv or depth > 8:
        return [([], "too deeply nested")] if argv else []
    head = os.path.basename(argv[0])
    if head != argv[0]:  # /bin/rm -> rm
        return [([_part([head] + argv[1:], part, part.dynamic)], "")]
    if head in SHELLS:
        return [_shell(argv, part)]
    if head == "eval":
        return [_parsed(" ".join(argv[1:]), any(part.dynamic[1:]), "eval of an expansion")]
    if head == "find":
        return [([_part(words, part, [False] * len(words))], "") for words in _find_exec(argv)]
    if head in ("su", "runuser") and "-c" in argv[1:-1]:
        return [_parsed(argv[argv.index("-c") + 1], part.dynamic[argv.index("-c") + 1], "su -c of an expansion")]
    if head in WRAPPERS:
        start = _after_wrapper(head, argv)
        words, dynamic = argv[start:], part.dynamic[start:]
        if head == "env" and any(w in ("-S", "--split-string") or w.startswith("-S") for w in argv[1:]):
            return [_parsed(" ".join(words), any(dynamic), "env -S of an expansion")]
        if head == "watch" or (head == "flock" and "-c" in argv):
            return [_parsed(" ".join(w for w in words if w != "-c"), any(dynamic), "a dynamic command")]
        if dynamic[:1] == [True]:
            return [([], "the command word is a variable or substitution")]
        return [([_part(words, part, dynamic)], "")] if words else []
    normalized = git_normalized(argv)
    if normalized:
        return [([_part(normalized, part, [False] * len(normalized))], "")]
    return []


def _shell(argv: list[str], part: Part) -> tuple[list[Part], str]:
    """`sh -lc 'cmd'`, `bash -ec ...`, `bash -s`, `bash <<< 'cmd'`, `echo cmd | bash`; a script file runs as written."""
    i, command_flag = 1, False
    while i < len(argv):
        word = argv[i]
        if word == "--":
            i += 1
            break
        if word in ("-o", "+o", "--rcfile", "--init-file", "-O", "+O"):
            i += 2
            continue
        if word.startswith("--") or not re.match(r"[-+]", word) or word in ("-", "+"):
            if word.startswith("--"):
                i += 1
                continue
            break
        if word.startswith("-") and "c" in word[1:]:
            command_flag = True
        i += 1
    if command_flag:
        if i >= len(argv):
            return [], "shell -c without a command"
        return _parsed(argv[i], part.dynamic[i] if i < len(part.dynamic) else True, "shell -c of an expansion")
    if i < len(argv) and argv[i] not in ("-s",):
        return [], ""  # `bash script.sh`: the script runs; rules match the command as written
    if part.stdin is not None:
        return _parsed(part.stdin, False, "")
    if part.stdin_unknown:
        return [], "a shell reads its commands from a pipe or file"
    return [], ""


def _parsed(text: str, dynamic: bool, problem: str) -> tuple[list[Part], str]:
    if dynamic:
        return [], problem or "a dynamic command"
    split = split_command(text)
    return split.parts, split.problem


def _after_wrapper(head: str, argv: list[str]) -> int:
    """Where the wrapped command starts in argv."""
    takes_value = WRAPPERS[head]
    i, leading = 1, _LEADING_VALUE.get(head, 0)
    while i < len(argv):
        word = argv[i]
        if word == "--":
            i += 1
            break
        if head == "env" and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", word):
            i += 1
        elif word.startswith("-") and len(word) > 1:
            i += 2 if word in takes_value else 1
        elif head in ("nice", "chrt") and re.fullmatch(r"[+-]?\d+", word) and leading:
            i, leading = i + 1, leading - 1
        elif leading:
            i, leading = i + 1, leading - 1
        else:
            break
    if head == "exec" and i < len(argv) and argv[i] == "-c":
        i += 1
    return i


def _find_exec(argv: list[str]) -> list[list[str]]:
    """The command lines of find's -exec/-execdir/-ok/-okdir actions."""
    runs, i = [], 0
    while i < len(argv):
        if argv[i] in _FIND_EXEC:
            j = i + 1
            while j < len(argv) and argv[j] not in (";", "+", "\\;"):
                j += 1
            if argv[i + 1:j]:
                runs.append(argv[i + 1:j])
            i = j
        i += 1
    return runs


def _part(words: list[str], outer: Part, dynamic: list[bool]) -> Part:
    """An inner command inherits the outer one's stdin and redirections (they still apply to it)."""
    return Part(" ".join(_quoted(w) for w in words), words, [], list(outer.redirects), list(dynamic),
                outer.stdin, outer.stdin_unknown)


def _quoted(word: str) -> str:
    return word if re.fullmatch(r"[\w@%+=:,./~^{}-]+", word) else "'" + word.replace("'", "'\\''") + "'"
