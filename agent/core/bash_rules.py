"""The Bash half of the permission check, on the parsed command (shell_parse) and every command it runs
(shell_unwrap). In order:
  1. a Bash deny rule matching any command, inner ones included, denies;
  2. a file the command writes (`>`, `>>`, tee, `sed -i`, cp/mv targets, ...) under an Edit deny rule, or a
     file it names under a Read deny rule (globs expanded, symlinks resolved), denies;
  3. bypassPermissions allows (asks when deny rules exist but the command could not be read);
  4. an ask rule asks; a command we could not read asks when Bash deny or ask rules exist;
  5. a write outside the project and additional dirs, or to agent settings, hooks,
     skills, commands, agents or any .git/, asks even under allow rules;
  6. without the sandbox, a recursive read (grep -r, rg, find, ls -R) reaching a Read-denied path or, for
     the auto-allowed list, leaving the project through a symlink, asks;
  7. an allow rule for the whole tool allows; a command we could not read asks;
  8. with the sandbox in auto-allow mode, a sandboxed command runs without asking;
  9. else every part needs an allow rule or is on the small read-only list with its paths inside.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agent.core.rule_match import (EDIT_TOOLS, RISKY_ENV, Decision, _bash_spec_matches, _covers, _path_matcher,
                                   _rule_reason, _Rule, _with_env)
from agent.core.shell_parse import Part, split_command
from agent.core.shell_paths import command_dirs, expand_word, read_words, recursive_roots, walk, write_words
from agent.core.shell_unwrap import expand

# No git: a repository's own config (core.fsmonitor, diff drivers, pager) can make `git status` run code.
SAFE_COMMANDS = frozenset({"pwd", "ls", "cat", "head", "tail", "wc", "grep", "echo"})


class BashRules:
    def __init__(self, permissions: Any) -> None:
        self.p = permissions  # the Permissions object: rules, mode, dirs, path helpers, sandbox

    def check(self, command: str, cwd: Path) -> Decision:
        p = self.p
        split = split_command(command)
        unwrapped = expand(split.parts)
        parts = unwrapped.parts
        problem = split.problem or unwrapped.problem
        for rule in p.rules["deny"]:
            part = next((x for x in parts if self.matches(rule, x, "deny")), None)
            if _covers(rule.tool, "Bash") and (rule.specifier is None or part):
                subject = part.command if part and rule.specifier else None
                return Decision("deny", _rule_reason("deny", rule, p._show(rule.source), subject), rule.text)
        dirs = command_dirs(parts, cwd)
        denied = self._path_denied(parts, dirs or [cwd])
        if denied:
            return denied
        specific = [r for kind in ("deny", "ask") for r in p.rules[kind] if r.tool == "Bash" and r.specifier]
        if p.mode == "bypassPermissions":
            if not problem or not any(r in p.rules["deny"] for r in specific):
                return Decision("allow", "Bypass mode: allowed without asking.")
            return Decision("ask", f"The command could not be parsed with confidence ({problem}), "
                                   "so deny rules cannot be checked; it needs approval.")
        for rule in p.rules["ask"]:
            part = next((x for x in parts if self.matches(rule, x, "ask")), None)
            if _covers(rule.tool, "Bash") and (rule.specifier is None or part):
                subject = part.command if part and rule.specifier else None
                return Decision("ask", _rule_reason("ask", rule, p._show(rule.source), subject), rule.text)
        if dirs is None and any(write_words(x) or read_words(x) for x in parts) and self._path_rules():
            return Decision("ask", "The command changes to a directory that cannot be resolved before it runs, so "
                                   "Read and Edit deny rules cannot be checked; it needs approval.")
        if problem and specific:
            return Decision("ask", f"The command could not be parsed with confidence ({problem}), "
                                   "so deny and ask rules cannot be checked; it needs approval.")
        risky = self._risky_write(parts, dirs)
        if risky:
            return risky
        sandboxed = p.sandbox is not None and p.sandbox.sandboxed(command)
        reach = None if sandboxed else self._recursive_reach(parts, cwd)
        if reach:
            return reach
        whole = next((r for r in p.rules["allow"] if _covers(r.tool, "Bash") and r.specifier is None), None)
        if whole:
            return Decision("allow", _rule_reason("allow", whole, p._show(whole.source)), whole.text)
        if problem:
            return Decision("ask", f"The command could not be parsed with confidence ({problem}); it needs approval.")
        if not split.parts:
            return Decision("allow", "The command is empty.")
        if sandboxed and p.sandbox.auto_allow:
            return Decision("allow", "Runs in the sandbox (autoAllowBashIfSandboxed): allowed without asking.")
        used: list[str] = []
        pending: list[str] = []
        changes_dir = any(x.argv[:1] in (["cd"], ["pushd"], ["popd"]) for x in split.parts)
        for part in split.parts:
            rule = next((r for r in p.rules["allow"] if self.matches(r, part, "allow")), None)
            if rule:
                used += [] if rule.text in used else [rule.text]
            elif changes_dir or not self.is_safe(part, cwd):
                pending.append(f"`{part.command}`")
        if pending:
            return Decision("ask", f"Bash command needs approval: {'; '.join(pending)}.")
        if used:
            return Decision("allow", f"Allowed by {', '.join(used)}.", ", ".join(used))
        return Decision("allow", "Read-only command inside the project.")

    def matches(self, rule: _Rule, part: Part, behavior: str) -> bool:
        if not _covers(rule.tool, "Bash") or rule.specifier is None:
            return False
        if behavior == "allow":  # as written; a risky assignment must be part of the rule itself
            forms = [_with_env(part) if any(RISKY_ENV.match(e) for e in part.env) else part.command]
        else:  # deny and ask also see the words unquoted; wrappers and shells come as parts of their own
            forms = [part.command, _with_env(part), " ".join(part.argv)]
        return any(_bash_spec_matches(rule.specifier, form) for form in forms)

    def is_safe(self, part: Part, cwd: Path) -> bool:
        """A SAFE_COMMANDS part that reads nothing outside the allowed dirs and writes nothing."""
        p = self.p
        if part.env or not part.argv or part.argv[0] not in SAFE_COMMANDS or not p._inside(cwd):
            return False
        if write_words(part):
            return False
        if part.argv[0] == "echo":
            return not any(part.dynamic)
        if any(part.dynamic):
            return False
        roots, follow = recursive_roots(part)
        for word in read_words(part):
            paths = expand_word(word, cwd)
            if paths is None or not all(p._inside(path) for path in paths):
                return False
        for word in roots:
            for root in expand_word(word, cwd) or []:
                if root.is_dir() and any(path is None or not p._inside(path) for path in walk(root, follow)):
                    return False
        return True

    def _path_rules(self) -> bool:
        return any(r.specifier and r.tool in ("Read", "Edit") for r in self.p.rules["deny"])

    def _path_denied(self, parts: list[Part], dirs: list[Path]) -> Decision | None:
        """An Edit deny rule over a file the command writes, or a Read deny rule over a file it names."""
        p = self.p
        for kind, words_of in (("Edit", write_words), ("Read", read_words)):
            tools = EDIT_TOOLS if kind == "Edit" else {"Read"}
            rules = [r for r in p.rules["deny"] if r.specifier and r.tool in tools]
            for part in parts:
                for word, cwd in ((w, d) for w in words_of(part) for d in dirs):
                    for path in expand_word(word, cwd) or []:
                        lexical = Path(os.path.normpath(word if os.path.isabs(word) else cwd / word))
                        rule = next((r for r in rules if any(_path_matcher(r.specifier, p.project_dir)(x)
                                                             for x in (path, lexical))), None)
                        if rule:
                            verb = "writes" if kind == "Edit" else "reads"
                            return Decision("deny", f"Denied by rule {rule.text} ({p._show(rule.source)}): "
                                                    f"`{part.command}` {verb} {p._show(str(path))}.", rule.text)
        return None

    def _risky_write(self, parts: list[Part], dirs: list[Path] | None) -> Decision | None:
        """A write outside the project or to agent configuration or a .git/: ask, whatever rule allows the command."""
        p = self.p
        for part in parts:
            for word, cwd in ((w, d) for w in write_words(part) for d in dirs or [None]):
                paths = expand_word(word, cwd) if cwd is not None else None
                if paths is None:
                    return Decision("ask", f"`{part.command}` writes to {word}, which cannot be resolved before it "
                                           "runs; it needs approval.")
                for path in paths:
                    if p._protected(path):
                        return Decision("ask", f"`{part.command}` writes {p._show(str(path))}, which holds agent "
                                               "settings, hooks, skills or git internals; it needs approval.")
                    if not p._inside(path):
                        return Decision("ask", f"`{part.command}` writes {path}, outside the project directory; "
                                               "it needs approval.")
        return None

    def _recursive_reach(self, parts: list[Part], cwd: Path) -> Decision | None:
        """A recursive read that would reach a path a Read deny rule hides."""
        p = self.p
        rules = [r for r in p.rules["deny"] if r.tool == "Read" and r.specifier]
        if not rules:
            return None
        matchers = [(r, _path_matcher(r.specifier, p.project_dir)) for r in rules]
        for part in parts:
            roots, follow = recursive_roots(part)
            for word in roots:
                for root in expand_word(word, cwd) or []:
                    if not root.is_dir():
                        continue
                    for path in walk(root, follow):
                        hit = next((r for r, m in matchers if path is None or m(path)), None)
                        if hit:
                            return Decision("ask", f"`{part.command}` reads the whole of {p._show(str(root))}, "
                                                   f"which holds paths {hit.text} denies; it needs approval.")
        return None

