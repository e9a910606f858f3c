"""One-character slips in a regular expression the function passes to `re` (MutRex's operators, Arcaini et al.
2017): a character class given one member too many or too few, or negated the wrong way; a word boundary or
an anchor that should not be there; a quantifier that should allow none (`*` for `+`), require one, or stop at the
first match. A small model writing `\\b[a-z'-]+\\b` for "hyphens separate words" keeps its slip through every
round, and a regex has no operator the other one-expression changes (mutations.py) could reach."""
from __future__ import annotations

import ast
import re

from agent.pipeline.source_text import SourceText

RE_FUNCTIONS = ("compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split")
# members a word-like class often lacks: digits, underscore, apostrophe, hyphen, dot, capitals
ADDED_MEMBERS = ("0-9", "_", "'", "-", ".", "A-Z")
MAX_PER_PATTERN = 40


def pattern_changes(src: SourceText, tree: ast.Module, nodes: list[ast.AST]) -> list[tuple[ast.AST, str]]:
    """(the pattern's literal, its new spelling) for each slip in the patterns the function's `re` calls use,
    written in the function or bound at module level (`WORD = re.compile(...)`) and named in it."""
    module = {t.id: a.value for a in tree.body if isinstance(a, ast.Assign)
              for t in a.targets if isinstance(t, ast.Name)}
    calls = [n for n in nodes if _re_call(n)]
    calls += [module[n.id] for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
              and _re_call(module.get(n.id))]
    out, seen = [], set()
    for call in calls:
        pattern = _pattern(call)
        if pattern is None or id(pattern) in seen or (text := src.text(pattern)) is None:
            continue
        seen.add(id(pattern))
        out += [(pattern, _spelled(text, new)) for new in pattern_variants(pattern.value)[:MAX_PER_PATTERN]]
    return out


def pattern_variants(pattern: str) -> list[str]:
    """The pattern with one slip undone each, those that compile: removals and quantifiers, then a member added,
    then two removals together (`\\b[a-z'-]+\\b` -> `[a-z']+` when hyphens and digits both separate words)."""
    classes, _, _, quantifiers = _scan(pattern)
    removals = _removals(pattern)
    out = list(removals)
    for start, end, members, negated in classes:
        out.append(pattern[:start + 1] + ("" if negated else "^") + pattern[start + 1 + int(negated):])
    for at, char, lazy in quantifiers:
        after = pattern[at + 1 + int(lazy):]
        if lazy:
            out.append(pattern[:at + 1] + after)
        elif char in "*+":
            out += [pattern[:at] + ("+" if char == "*" else "*") + after, pattern[:at + 1] + "?" + after]
        else:
            out.append(pattern[:at] + after)  # optional made required
    for start, end, members, negated in classes:
        inside = pattern[start + 1:end]
        if not negated:  # at the class's start, where a `-` is literal and joins no range
            out += [pattern[:start + 1] + m + pattern[start + 1:] for m in ADDED_MEMBERS if m not in inside and
                    not (m in ("0-9", "_") and "\\w" in inside)]
    out += [twice for once in removals for twice in _removals(once)]
    return [v for v in dict.fromkeys(out) if v != pattern and _compiles(v)]


def _removals(pattern: str) -> list[str]:
    """A class member, a `\\b` (or every one of them) or an anchor taken out."""
    classes, boundaries, anchors, _ = _scan(pattern)
    out = [pattern[:a] + pattern[b:] for _, _, members, _ in classes if len(members) > 1 for a, b in members]
    out += [pattern[:a] + pattern[a + 2:] for a in boundaries]
    if len(boundaries) > 1:  # \\b...\\b: both go, as they were written together
        out.append(re.sub(r"(?<!\\)((?:\\\\)*)\\b", r"\1", pattern))
    return out + [pattern[:a] + pattern[a + 1:] for a in anchors]


def _scan(p: str) -> tuple[list, list[int], list[int], list[tuple[int, str, bool]]]:
    """Character classes (start, end of `]`, member spans, negated), `\\b` positions, `^`/`$` anchors and
    quantifiers (position, character, lazy) of a pattern, read left to right."""
    classes, boundaries, anchors, quantifiers = [], [], [], []
    i, n = 0, len(p)
    while i < n:
        c = p[i]
        if c == "\\":
            if p[i + 1:i + 2] == "b":
                boundaries.append(i)
            i += 2
        elif c == "[":
            j = i + 1
            negated = p[j:j + 1] == "^"
            j += int(negated)
            members, first = [], True
            while j < n and (p[j] != "]" or first):
                a = j
                j += 2 if p[j] == "\\" else 1
                if p[j:j + 1] == "-" and j + 1 < n and p[j + 1] != "]":
                    j += 3 if p[j + 1] == "\\" else 2
                members.append((a, j))
                first = False
            if j >= n:
                return [], [], [], []  # unbalanced: re.compile would refuse it anyway
            classes.append((i, j, members, negated))
            i = j + 1
        elif c == "(" and p[i + 1:i + 2] == "?":
            i += 2  # a group's own `?`, not a quantifier
        elif c in "*+?" and i and p[i - 1] not in "(|":
            lazy = p[i + 1:i + 2] == "?"
            quantifiers.append((i, c, lazy))
            i += 1 + int(lazy)
        elif c in "^$":
            anchors.append(i)
            i += 1
        else:
            i += 1
    return classes, boundaries, anchors, quantifiers


def _re_call(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.func.attr in RE_FUNCTIONS


def _pattern(call: ast.Call) -> ast.Constant | None:
    node = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "pattern"), None)
    return node if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _spelled(text: str, value: str) -> str:
    """`value` as a literal spelled like `text` (its prefix and quotes) where that reads back as `value`."""
    prefix = text[:len(text) - len(text.lstrip("rRbBuU"))]
    rest = text[len(prefix):]
    quote = rest[:3] if rest[:3] in ('"""', "'''") else rest[:1]
    spelled = prefix + quote + value + quote
    try:
        if ast.literal_eval(spelled) == value:
            return spelled
    except (SyntaxError, ValueError):
        pass
    return repr(value)


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    return True
