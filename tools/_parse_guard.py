"""The parse guard: a change that would stop a parsing .py/.json/.toml/.yaml/.ini file from parsing is refused.

A file that did not parse before is not guarded (the agent may be mid-fix). A new file is guarded for the
formats whose suffix is unambiguous (.cfg and .ini dialects vary too much to refuse a new one).
"""
from __future__ import annotations

import configparser
import json
import re
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tools._files import numbered

CONTEXT_LINES = 3  # lines shown either side of the error line


@dataclass(frozen=True)
class Problem:
    kind: str  # "Python", "JSON", ...
    line: int | None  # 1-based, None when the parser does not say
    detail: str

    @property
    def reason(self) -> str:
        """One line: 'invalid Python (line 3: expected ':')'."""
        return f"invalid {self.kind} ({f'line {self.line}: ' if self.line else ''}{self.detail})"


@dataclass(frozen=True)
class Refusal:
    reason: str
    region: str  # the lines around the error, numbered like Read


def parse_problem(path: Path, before: str | None, after: str) -> Refusal | None:
    """Why `after` may not replace `before` (None: a new file) at `path`; None when it may."""
    suffix = path.suffix.lower()
    check = _CHECKS.get(suffix)
    if check is None or (before is None and (suffix in _NEW_UNGUARDED or not after.strip())):
        return None
    problem = check(after)
    if problem is None or (before is not None and check(before) is not None):
        return None
    lines = after.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the final newline ends a line; it does not start one (Read shows no such line either)
    at = min(problem.line or 1, len(lines))
    first = max(at - CONTEXT_LINES, 1)
    return Refusal(problem.reason, numbered(lines[first - 1:at + CONTEXT_LINES], first))


def _python(text: str) -> Problem | None:
    try:
        with warnings.catch_warnings():  # invalid escape sequences and the like warn on stderr; not our business
            warnings.simplefilter("ignore")
            compile(text, "<edit>", "exec", dont_inherit=True)  # the compiler, not just ast: 'return' outside def
    except SyntaxError as e:
        return Problem("Python", e.lineno, e.msg)
    except (ValueError, RecursionError, MemoryError) as e:  # null bytes, absurd nesting
        return Problem("Python", None, str(e))
    return None


def _json(text: str) -> Problem | None:
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return Problem("JSON", e.lineno, e.msg)
    except RecursionError as e:
        return Problem("JSON", None, str(e))
    return None


_TOML_AT = re.compile(r" \(at line (\d+), column \d+\)$|\(at end of document\)$")


def _toml(text: str) -> Problem | None:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message = str(e)
        at = _TOML_AT.search(message)
        line = int(at.group(1)) if at and at.group(1) else text.count("\n") + 1 if at else None
        return Problem("TOML", line, message[:at.start()].strip() if at else message)
    return None


def _yaml(text: str) -> Problem | None:
    import yaml  # a dependency, but only needed here

    try:
        for _ in yaml.safe_load_all(text):  # every document of a multi-document file
            pass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        detail = "; ".join(filter(None, [getattr(e, "context", None), getattr(e, "problem", None)])) or str(e)
        return Problem("YAML", mark.line + 1 if mark else None, detail)
    except RecursionError as e:
        return Problem("YAML", None, str(e))
    return None


def _ini(text: str) -> Problem | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.MissingSectionHeaderError as e:
        return Problem("INI", e.lineno, f"a line before any [section] header: {e.line.strip()!r}")
    except configparser.ParsingError as e:
        line = e.errors[0][0]
        return Problem("INI", line, f"not a key = value line: {text.split(chr(10))[line - 1].strip()!r}")
    except (configparser.DuplicateSectionError, configparser.DuplicateOptionError) as e:
        what = f"option {e.option!r} in section {e.section!r}" if hasattr(e, "option") else f"section {e.section!r}"
        return Problem("INI", e.lineno, f"{what} appears twice")
    except configparser.Error as e:
        return Problem("INI", None, str(e).splitlines()[0])
    return None


_CHECKS: dict[str, Callable[[str], Problem | None]] = {
    ".py": _python, ".pyi": _python, ".json": _json, ".toml": _toml, ".yaml": _yaml, ".yml": _yaml,
    ".ini": _ini, ".cfg": _ini,
}
_NEW_UNGUARDED = {".ini", ".cfg"}
