"""Where a value an error message quotes comes from: a crash on a row of a data file, said in plain words.

"ValueError: could not convert string to float: 'amount'" names the value, not the row; a small model shown the
traceback wraps the conversion in try/except. That 'amount' is the first line of sales.csv (its header) is the
fact it misses.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agent.core.loop import Agent

EXCEPTION = re.compile(r"^(?:E\s+)?(\w+(?:Error|Exception)): (.+)$", re.MULTILINE)
QUOTED = re.compile(r"'([^'\n]{1,80})'|\"([^\"\n]{1,80})\"")
FIELDS = re.compile(r"\s*[,;\t|]\s*|\s*[:=]\s+|\s+")
MAX_LINE = 160  # a longer line is cut where it is shown
CODE = {".py", ".pyi"}


def value_origin(output: str, files: list[Path], root: Path) -> str:
    """For the last exception line of `output` that quotes a whole field of a line of one of `files` (data, not
    code): "The value 'amount' in the ValueError comes from line 1 of sales.csv, its header row: `region,rep,amount`."
    "" when there is none."""
    errors = EXCEPTION.findall(output)
    if not errors:
        return ""
    kind, message = errors[-1]
    for m in QUOTED.finditer(message):
        value = (m.group(1) or m.group(2)).strip()
        for path in files:
            if not value or path.suffix in CODE or not path.is_file():
                continue
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            for no, line in enumerate(lines, 1):
                if value in (f.strip("\"'") for f in FIELDS.split(line.strip())):
                    name = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
                    what = ", its header row" if no == 1 and _header(lines) else ", its first line" if no == 1 else ""
                    return f"The value '{value}' in the {kind} comes from line {no} of {name}{what}: " \
                           f"`{line[:MAX_LINE]}`."
    return ""


def _header(lines: list[str]) -> bool:
    """The first line names columns: no field of it is a number, and a later line has as many fields, one a number."""
    fields = [FIELDS.split(ln.strip()) for ln in lines[:2]]
    if len(fields) < 2 or len(fields[0]) < 2 or len(fields[0]) != len(fields[1]):
        return False
    return not any(_number(f) for f in fields[0]) and any(_number(f) for f in fields[1])


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def note(driver: Any, agent: Agent, plan: Any) -> str:
    """value_origin over the files the request was shown with that the Read rules let the model see."""
    files = [p for p in plan.targets + plan.context if driver._may_read(agent, p)]
    return value_origin(plan.failure, list(dict.fromkeys(files)), driver.root)
