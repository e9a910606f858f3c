"""Split a shell command into the simple commands it runs, for permission checks.

`git status && rm -rf build | tee log` runs three commands; each must be allowed on its
own. Inner commands of `( )`, `$( )` and backticks are parts too (they run first, so they
come first). Quotes and escapes are honoured so `echo "a && b"` is one part. Leading
`NAME=value` assignments are kept apart from the command text that rules match. Anything
we cannot read with confidence (heredocs, process substitution, `case`, function
definitions, unbalanced quotes) sets `ok=False` so the caller asks instead of allowing;
the parts found so far are still returned so deny rules can apply to them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Part:
    command: str  # tokens as written, single-spaced, without env assignments: what rules match
    argv: list[str]  # words after quote removal (substitutions stay as written, e.g. "$(date)")
    env: list[str] = field(default_factory=list)  # leading NAME=value assignments, as written
    redirects: list[tuple[str, str]] = field(default_factory=list)  # (operator incl. fd, target word)


@dataclass
class Split:
    parts: list[Part]
    ok: bool  # False: not parsed confidently; ask rather than allow
    problem: str = ""  # why not, e.g. "heredoc"


_OPERATOR_CHARS = set(";&|()<>\n")
_BLANKS = " \t"
_REDIRECT = re.compile(r"\d*(?:>>|>&|>\||<>|<&|<<<|<<-|<<|>|<)|&>>|&>")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
# Reserved words that only introduce the command after them (`if grep -q x f; then ...`).
_LEADING_KEYWORDS = {"if", "then", "elif", "else", "do", "while", "until", "!", "{"}
_CLOSERS = {"fi", "done", "}"}
_MAX_DEPTH = 32


def split_command(command: str) -> Split:
    """The simple commands `command` runs, in execution order, plus whether we trust the split."""
    parser = _Parser(command, depth=0)
    parser.parse_list(end=None)
    return Split(parser.parts, ok=not parser.problem, problem=parser.problem)


class _Parser:
    def __init__(self, s: str, depth: int):
        self.s, self.i, self.depth = s, 0, depth
        self.parts: list[Part] = []
        self.problem = ""

    def fail(self, problem: str) -> None:
        self.problem = self.problem or problem

    def at_end(self) -> bool:
        return self.i >= len(self.s) or self.problem == "heredoc"

    def skip_blanks(self) -> None:
        while not self.at_end():
            if self.s[self.i] in _BLANKS:
                self.i += 1
            elif self.s.startswith("\\\n", self.i):  # line continuation
                self.i += 2
            else:
                return

    # A list: commands joined by ; & && || | |& and newlines, up to `end` (")" inside ( ) and $( )).
    def parse_list(self, end: str | None) -> None:
        if self.depth > _MAX_DEPTH:
            self.fail("too deeply nested")
            self.i = len(self.s)
            return
        while True:
            self.skip_blanks()
            if self.at_end():
                if end is not None and self.problem != "heredoc":
                    self.fail("unbalanced parenthesis")
                return
            c = self.s[self.i]
            if c == ")":
                self.i += 1
                if end is None:
                    self.fail("unbalanced parenthesis")
                    continue
                return
            if self.s.startswith(";;", self.i):
                self.fail("case statement")
                self.i += 2
            elif c in ";&|\n" and not _REDIRECT.match(self.s, self.i):
                self.i += 2 if self.s[self.i:self.i + 2] in ("&&", "||", "|&") else 1
            elif c == "#":
                while not self.at_end() and self.s[self.i] != "\n":
                    self.i += 1
            else:
                self.parse_command(end)

    # A simple command: assignments, words and redirections up to the next operator.
    def parse_command(self, end: str | None) -> None:
        tokens: list[tuple[str, str, str]] = []  # (kind, as written, value); kind: word|assign|redirect
        redirects: list[tuple[str, str]] = []
        while True:
            self.skip_blanks()
            if self.at_end():
                break
            c = self.s[self.i]
            redirect = _REDIRECT.match(self.s, self.i)
            if redirect:
                self.parse_redirect(redirect.group(), tokens, redirects)
                continue
            if c in ";&|\n" or (c == ")" and end is not None):
                break
            if c == ")":
                self.fail("unbalanced parenthesis")
                self.i += 1
                continue
            if c == "(":
                if tokens or self.s.startswith("((", self.i):
                    self.fail("unsupported '(' syntax (function, array or arithmetic)")
                self.i += 1
                self.depth += 1
                self.parse_list(end=")")  # subshell: its commands are parts of their own
                self.depth -= 1
                continue
            if c == "#" and (self.i == 0 or self.s[self.i - 1] in _BLANKS):
                break  # a comment; parse_list skips it
            start = self.i
            value = self.read_word()
            raw = self.s[start:self.i].replace("\\\n", "")
            only_assignments = all(kind == "assign" for kind, _, _ in tokens)
            kind = "assign" if only_assignments and _ASSIGNMENT.match(raw) else "word"
            if kind == "word" and value in ("case", "function") and not any(k == "word" for k, _, _ in tokens):
                self.fail(f"{value} statement")
            tokens.append((kind, raw, value))
        self.add_part(tokens, redirects)

    def parse_redirect(self, op: str, tokens: list, redirects: list) -> None:
        start = self.i
        self.i += len(op)
        if op.lstrip("0123456789") in ("<<", "<<-"):
            self.fail("heredoc")
            return
        if self.s.startswith("(", self.i) and op in ("<", ">"):
            self.fail("process substitution")
        self.skip_blanks()
        if self.at_end() or self.s[self.i] in _OPERATOR_CHARS:
            self.fail("redirection without a target")
            return
        target = self.read_word()
        raw = " ".join(self.s[start:self.i].replace("\\\n", "").split())
        tokens.append(("redirect", raw, target))
        redirects.append((op, target))

    def add_part(self, tokens: list[tuple[str, str, str]], redirects: list[tuple[str, str]]) -> None:
        env = []
        while tokens and (tokens[0][0] == "assign" or (tokens[0][0] == "word" and tokens[0][2] in _LEADING_KEYWORDS)):
            kind, raw, _ = tokens.pop(0)
            if kind == "assign":
                env.append(raw)
        words = [value for kind, _, value in tokens if kind == "word"]
        if words[:1] in (["for"], ["select"]):
            return  # a loop header runs nothing itself; its $( ) parts are already in
        if len(words) == 1 and words[0] in _CLOSERS:  # `done < in.txt`: only the redirection remains
            tokens = [token for token in tokens if token[0] != "word"]
            words = []
        if not tokens and not env:
            return
        command = " ".join(raw for _, raw, _ in tokens) if tokens else " ".join(env)
        self.parts.append(Part(command, words, env, redirects))

    # One word: quotes, escapes and substitutions, up to an unquoted blank or operator.
    def read_word(self) -> str:
        value = []
        while not self.at_end():
            c = self.s[self.i]
            if c in _BLANKS or c in _OPERATOR_CHARS:
                break
            if c == "\\":
                if self.s.startswith("\\\n", self.i):
                    self.i += 2
                    continue
                value.append(self.s[self.i + 1:self.i + 2])
                self.i += 2
            elif c == "'":
                value.append(self.read_single_quoted())
            elif self.s.startswith("$'", self.i):
                self.i += 1
                value.append(self.read_single_quoted(escapes=True))
            elif c == '"' or self.s.startswith('$"', self.i):
                self.i += 1 if c == '"' else 2
                value.append(self.read_double_quoted())
            elif c == "$" or c == "`":
                value.append(self.read_substitution())
            else:
                value.append(c)
                self.i += 1
        return "".join(value)

    def read_single_quoted(self, escapes: bool = False) -> str:
        start = self.i + 1
        j = start
        while j < len(self.s) and self.s[j] != "'":
            j += 2 if escapes and self.s[j] == "\\" else 1
        if j >= len(self.s):
            self.fail("unbalanced quote")
        self.i = j + 1
        return self.s[start:j]

    def read_double_quoted(self) -> str:
        value = []
        while True:
            if self.i >= len(self.s):
                self.fail("unbalanced quote")
                return "".join(value)
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                return "".join(value)
            if c == "\\" and self.s[self.i + 1:self.i + 2] in ('"', "\\", "$", "`", "\n"):
                value.append("" if self.s[self.i + 1] == "\n" else self.s[self.i + 1])
                self.i += 2
            elif c == "$" or c == "`":
                value.append(self.read_substitution())
            else:
                value.append(c)
                self.i += 1

    # $( ), ` `, $(( )), ${ } and plain $NAME; returns the text as written.
    def read_substitution(self) -> str:
        start = self.i
        if self.s.startswith("$((", self.i):
            self.skip_balanced("((", "))")
        elif self.s.startswith("$(", self.i):
            self.i += 2
            self.depth += 1
            self.parse_list(end=")")
            self.depth -= 1
        elif self.s.startswith("${", self.i):
            self.skip_balanced("{", "}")
        elif self.s[self.i] == "`":
            self.read_backticks()
        else:
            self.i += 1
        return self.s[start:self.i]

    def skip_balanced(self, opener: str, closer: str) -> None:
        """Skip ${...} or $((...)); substitutions nested inside are beyond us."""
        close = self.s.find(closer, self.i)
        body = self.s[self.i:close] if close >= 0 else ""
        if close < 0:
            self.fail("unbalanced " + opener)
            self.i = len(self.s)
            return
        if "$(" in body[1:] or "`" in body:
            self.fail("command substitution inside ${ } or $(( ))")
        self.i = close + len(closer)

    def read_backticks(self) -> None:
        j = self.i + 1
        inner = []
        while j < len(self.s) and self.s[j] != "`":
            if self.s[j] == "\\" and self.s[j + 1:j + 2] in ("`", "\\", "$"):
                inner.append(self.s[j + 1])
                j += 2
            else:
                inner.append(self.s[j])
                j += 1
        if j >= len(self.s):
            self.fail("unbalanced backquote")
        self.i = j + 1
        sub = _Parser("".join(inner), self.depth + 1)
        sub.parse_list(end=None)
        self.parts.extend(sub.parts)
        if sub.problem:
            self.fail(sub.problem)
