"""A shell command as the simple commands it runs, read from tree-sitter-bash's syntax tree.

`git status && rm -rf build | tee log` runs three commands; each must be allowed on its own.
Commands inside `$( )`, backquotes and `<( )` are parts too and come first (they run first).
Every part keeps its redirections (including those of an enclosing `( ) > f` or `while ...; done
< f`), what it reads on stdin when that is known (a here-string, a here-document, or a literal
`echo`/`printf` piped into it) and which words are dynamic (an expansion or substitution we cannot
evaluate). Anything the tree marks as an error, and a command word that is a variable or a
substitution (`$x a.txt`, `$(echo rm) a.txt`), sets `ok=False` so the caller asks; the parts
found so far still come back so deny rules apply to them. Unwrapping (`sh -c`, `env`, `find -exec`)
is shell_unwrap's job.
"""
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

_PARSER = Parser(Language(tree_sitter_bash.language()))
_REDIRECTS = {"file_redirect", "heredoc_redirect", "herestring_redirect"}
_DYNAMIC = {"simple_expansion", "expansion", "command_substitution", "process_substitution",
            "arithmetic_expansion", "brace_expression"}
_HEREDOC = {"heredoc_start", "heredoc_body", "heredoc_end"}
_SUBSTITUTIONS = {"command_substitution", "process_substitution"}
MAX_DEPTH = 16


@dataclass
class Part:
    command: str  # the words and redirections as written, single-spaced, without env assignments: what rules match
    argv: list[str]  # words after quote removal (expansions stay as written, e.g. "$(date)")
    env: list[str] = field(default_factory=list)  # leading NAME=value assignments, as written
    redirects: list[tuple[str, str]] = field(default_factory=list)  # (operator incl. fd, target word)
    dynamic: list[bool] = field(default_factory=list)  # per argv word: holds an expansion we cannot evaluate
    stdin: str | None = None  # the text it reads on stdin when known (here-string, here-document, literal echo)
    stdin_unknown: bool = False  # it reads a pipe or file whose text we do not know


@dataclass
class Split:
    parts: list[Part]
    ok: bool  # False: not parsed confidently; ask rather than allow
    problem: str = ""  # why not, e.g. "syntax error"


def split_command(command: str) -> Split:
    """The simple commands `command` runs, in execution order, plus whether we trust the reading."""
    walker = _Walker()
    tree = _PARSER.parse(command.encode("utf-8", "surrogateescape"))
    try:
        walker.visit(tree.root_node, None, False)
    except RecursionError:
        walker.fail("too deeply nested")
    if tree.root_node.has_error:  # ERROR and MISSING nodes, wherever they are
        walker.fail("syntax error")
    return Split(walker.parts, ok=not walker.problem, problem=walker.problem)


def word_value(node: Node) -> tuple[str, bool]:
    """A word after quote removal, and whether it holds an expansion we cannot evaluate."""
    kind = node.type
    text = _text(node)
    if kind == "raw_string":
        return text[1:-1], False
    if kind == "ansi_c_string":
        try:
            return codecs.decode(text[2:-1], "unicode_escape"), False
        except UnicodeDecodeError:
            return text[2:-1], True
    if kind in ("string", "translated_string"):
        value, dynamic = [], False
        for child in node.named_children:
            if child.type == "string_content":
                value.append(re.sub(r'\\([$`"\\])', r"\1", _text(child)).replace("\\\n", ""))
            else:
                piece, dyn = word_value(child)
                value.append(piece)
                dynamic = dynamic or dyn
        return "".join(value), dynamic
    if kind == "concatenation":
        pieces = [word_value(child) for child in node.named_children]
        return "".join(p for p, _ in pieces), any(d for _, d in pieces)
    if kind in _DYNAMIC:
        return text, True
    if kind == "word":
        return re.sub(r"\\(.)", r"\1", text.replace("\\\n", ""), flags=re.DOTALL), False
    return text, _has_dynamic(node)


class _Walker:
    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.problem = ""
        self.depth = 0

    def fail(self, problem: str) -> None:
        self.problem = self.problem or problem

    def visit(self, node: Node, stdin: str | None, stdin_unknown: bool, redirects: list | None = None) -> None:
        if node.type == "ERROR" or node.is_missing:
            self.fail("syntax error")
        if self.depth > MAX_DEPTH:
            self.fail("too deeply nested")
            return
        self.depth += 1
        try:
            self._visit(node, stdin, stdin_unknown, redirects or [])
        finally:
            self.depth -= 1

    def _visit(self, node: Node, stdin: str | None, stdin_unknown: bool, redirects: list) -> None:
        kind = node.type
        if kind == "command":
            self.command(node, redirects, stdin, stdin_unknown)
        elif kind == "redirected_statement":
            self.redirected(node, redirects, stdin, stdin_unknown)
        elif kind == "pipeline":
            fed, unknown = stdin, stdin_unknown
            for child in node.named_children:
                before = len(self.parts)
                self.visit(child, fed, unknown, redirects)
                last = self.parts[-1] if len(self.parts) > before else None
                fed = _output_text(last)
                unknown = fed is None
        elif kind in ("variable_assignment", "variable_assignments") and _statement_level(node):
            self.substitutions(node)
            self.parts.append(Part(_text(node), [], [_text(a) for a in _assignments(node)]))
        elif kind in ("declaration_command", "unset_command"):
            self.substitutions(node)
            words = [word_value(c) for c in node.children if c.type not in ("variable_assignment",)]
            argv = [w for w, _ in words]
            self.parts.append(Part(" ".join(_text(c) for c in node.children), argv, [],
                                   list(redirects), [d for _, d in words], stdin, stdin_unknown))
        elif kind in ("heredoc_body", "string", "concatenation", "word"):
            self.substitutions(node)
        else:
            for child in node.named_children:
                if child.type in _REDIRECTS:
                    continue
                self.visit(child, stdin if child.type != "command_substitution" else None,
                           stdin_unknown and child.type != "command_substitution")

    def redirected(self, node: Node, outer: list, stdin: str | None, stdin_unknown: bool) -> None:
        body = node.child_by_field_name("body")
        own, after = [], []
        for child in node.children:
            if child.type in _REDIRECTS:
                own.append(child)
                if child.type == "heredoc_redirect":
                    own += [c for c in child.named_children if c.type in _REDIRECTS]
                    after += [c for c in child.named_children if c.type not in _REDIRECTS and c.type not in _HEREDOC]
        if body is None:
            return self.fail("redirection without a command")
        if body.type == "command":
            self.command(body, own + outer, stdin, stdin_unknown)
        else:
            self.visit(body, stdin, stdin_unknown, own + outer)
            parsed = [self.redirect(r) for r in own]
            self.parts.append(Part(" ".join(_text(r) for r in own), [], [],
                                   [(op, target) for op, target, _, _ in parsed]))
        last = self.parts[-1] if self.parts else None
        for statement in after:  # `cat <<EOF | bash`: the pipeline sits inside the here-document node
            fed = _output_text(last)
            self.visit(statement, fed, fed is None)

    def command(self, node: Node, redirect_nodes: list, stdin: str | None, stdin_unknown: bool) -> None:
        self.substitutions(node)
        for r in redirect_nodes:
            self.substitutions(r)
        env, words, raws = [], [], []
        nodes = list(redirect_nodes)
        for i, child in enumerate(node.children):
            name = node.field_name_for_child(i)
            if child.type == "variable_assignment" and not words:
                env.append(_text(child))
            elif child.type in _REDIRECTS:
                nodes.insert(0, child)
            elif name == "name":
                word = child.named_children[0] if child.named_children else child
                value, dynamic = word_value(word)
                if dynamic:
                    self.fail("the command word is a variable or substitution")
                words.append((value, dynamic))
                raws.append(_text(child))
            elif name == "argument" or (words and child.is_named and child.type not in ("comment",)):
                words.append(word_value(child))
                raws.append(_text(child))
        redirects = []
        for r in nodes:
            op, target, text, known = self.redirect(r)
            if op.endswith("<<<") or op.lstrip("0123456789").startswith("<<"):
                stdin, stdin_unknown = known, known is None
            elif op.lstrip("0123456789") == "<":
                stdin, stdin_unknown = None, True
            redirects.append((op, target))
            raws.append(text)
        if not words and not env and not redirects:
            return
        command = " ".join(raws) if raws else " ".join(env)
        self.parts.append(Part(command, [w for w, _ in words], env, redirects, [d for _, d in words],
                               stdin, stdin_unknown))

    def redirect(self, node: Node) -> tuple[str, str, str, str | None]:
        """(operator with its fd, target word, the redirection as written, the stdin text it supplies)."""
        fd = node.child_by_field_name("descriptor")
        op = next((_text(c) for c in node.children if not c.is_named), "")
        op = (_text(fd) if fd else "") + op
        if node.type == "heredoc_redirect":
            body = next((c for c in node.named_children if c.type == "heredoc_body"), None)
            start = next((c for c in node.named_children if c.type == "heredoc_start"), None)
            return op, "", f"{op}{_text(start) if start else ''}", _text(body) if body else ""
        target = node.child_by_field_name("destination")
        if target is None:
            target = next((c for c in node.named_children if c is not fd), None)
        value, dynamic = word_value(target) if target is not None else ("", False)
        text = " ".join(_text(node).split())
        if node.type == "herestring_redirect":
            return op, value, text, None if dynamic else value + "\n"
        return op, value, text, None

    def substitutions(self, node: Node) -> None:
        """Commands inside `$( )`, backquotes and `<( )` anywhere below `node`: parts of their own, run first."""
        for child in node.named_children:
            if child.type in _SUBSTITUTIONS:
                for statement in child.named_children:
                    self.visit(statement, None, False)
            elif child.type not in ("command", "redirected_statement", "pipeline", "list"):
                self.substitutions(child)
            if child.type == "ERROR":
                self.fail("syntax error")


def _text(node: Node | None) -> str:
    return node.text.decode("utf-8", "surrogateescape") if node is not None else ""


def _has_dynamic(node: Node) -> bool:
    return node.type in _DYNAMIC or any(_has_dynamic(c) for c in node.named_children)


def _statement_level(node: Node) -> bool:
    return node.parent is not None and node.parent.type not in ("command", "declaration_command")


def _assignments(node: Node) -> list[Node]:
    return [node] if node.type == "variable_assignment" else [c for c in node.named_children
                                                               if c.type == "variable_assignment"]


def _output_text(part: Part | None) -> str | None:
    """What a part writes to a pipe when we know it: `echo`/`printf` of literal words, `cat` of known stdin."""
    if part is None or any(part.dynamic) or part.redirects and any(">" in op for op, _ in part.redirects):
        return None
    if part.argv[:1] == ["echo"]:
        words = part.argv[1:]
        while words and re.fullmatch(r"-[neE]+", words[0]):
            words = words[1:]
        return " ".join(words) + "\n"
    if part.argv[:1] == ["printf"] and len(part.argv) > 1:
        return " ".join(part.argv[1:]).replace("\\n", "\n")
    if part.argv == ["cat"] and part.stdin is not None:
        return part.stdin
    return None
