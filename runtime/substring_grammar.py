"""`x-substring-of`: a string argument bound to a text, for the tool-call grammars (runtime.constrain).

A tool override property {"type": "string", "x-substring-of": TEXT} admits exactly the JSON strings whose value
is a non-empty run of whole, consecutive lines of TEXT (from a line start to a line end, joined by "\\n", without
the last line's newline): what an Edit's old_string copied from the file can be. xgrammar's JSON-schema compiler
does not know the key, so each such property becomes a const placeholder, the schema is compiled to EBNF text,
and the placeholder's literal is swapped for rules written here:

    sub_l{k}  ::= "<unique line k, JSON-escaped>"
    sub_s{i}  ::= sub_l{line i} ("\\n" sub_s{i+1})?     # line i, then possibly the lines after it
    sub       ::= sub_s{0} | sub_s{1} | ...            # a run may start at any line (an empty line only with more)

Identical lines share their literal rule, so the grammar's size is the distinct text plus a few symbols per line.
Strings are matched as json.dumps(..., ensure_ascii=False) writes them: non-ASCII characters raw, control
characters escaped.
"""
from __future__ import annotations

import copy
import json

KEY = "x-substring-of"
_MARK = "XSUBSTROF{}Q7Z"  # placeholder const value; "{}" is the property's number


def split_placeholders(schema: dict) -> tuple[dict, dict[str, str]]:
    """A copy of `schema` with each x-substring-of property replaced by a const placeholder, and the texts by
    placeholder. A schema without the key comes back unchanged (the same dict) with no texts."""
    texts: dict[str, str] = {}

    def walk(node):
        if isinstance(node, dict):
            if KEY in node:
                text = node[KEY]
                if not isinstance(text, str) or node.get("type", "string") != "string":
                    raise ValueError(f'{KEY} needs {{"type": "string", "{KEY}": <text>}}, got {node!r:.80}')
                if not any(text.split("\n")):
                    raise ValueError(f"{KEY} needs a text with at least one non-empty line")
                mark = _MARK.format(len(texts))
                texts[mark] = text
                return {"type": "string", "const": mark}
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    if KEY not in json.dumps(schema):
        return schema, {}
    placed = walk(copy.deepcopy(schema))
    if any(mark in json.dumps(schema) for mark in texts):
        raise ValueError("tool schema already holds the x-substring-of placeholder text")
    return placed, texts


def substitute(ebnf: str, texts: dict[str, str]) -> str:
    """EBNF from xgrammar's JSON-schema compiler with each placeholder literal replaced by its substring rules."""
    rules = []
    for i, (mark, text) in enumerate(texts.items()):
        literal = f'"\\"{mark}\\""'
        if ebnf.count(literal) != 1:
            raise ValueError(f"the x-substring-of placeholder appears {ebnf.count(literal)} times in the grammar")
        name = f"xsub{i}"
        ebnf = ebnf.replace(literal, f'("\\"" {name} "\\"")')
        rules.append(substring_rules(text, name))
    return ebnf.rstrip("\n") + "\n" + "\n".join(rules) + "\n"


def substring_rules(text: str, name: str) -> str:
    """EBNF rules defining `name`: the JSON-escaped (unquoted) non-empty runs of whole consecutive lines of `text`."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the text's final newline ends its last line; it does not start another
    unique: dict[str, int] = {}
    out = []
    for line in lines:
        if line not in unique:
            unique[line] = len(unique)
            out.append(f"{name}_l{unique[line]} ::= {_literal(line)}")
    n = len(lines)
    for i, line in enumerate(lines):
        more = f' ("\\\\n" {name}_s{i + 1})?' if i + 1 < n else ""
        out.append(f"{name}_s{i} ::= {name}_l{unique[line]}{more}")
    starts = [f"{name}_s{i}" if line else f'"\\\\n" {name}_s{i + 1}'
              for i, line in enumerate(lines) if line or i + 1 < n]
    out.append(f"{name} ::= " + " | ".join(f"({s})" for s in starts))
    return "\n".join(out)


def _literal(line: str) -> str:
    """The EBNF string literal matching `line` as it appears inside a JSON string."""
    escaped = json.dumps(line, ensure_ascii=False)[1:-1]
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'
