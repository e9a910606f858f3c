"""`---` YAML frontmatter + markdown body, and the field helpers skills, commands and agents share.

Files written for other agents often hold YAML that is technically invalid but that their parsers
accept, most often an unquoted colon in a description (`description: Use when: ...`). When strict
YAML fails we retry with a plain `key: value` reading, as the Agent Skills guidance suggests; only
if that fails too is the file reported as bad.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml


class FrontmatterError(ValueError):
    """A one-line message naming the file."""


_KEY_LINE = re.compile(r"([A-Za-z0-9_-]+)\s*:(?:\s+(.*))?$")
_FLOW_START = tuple("[{\"'|>&*!%@`")
_QUOTED = tuple("\"'|>&*!%@`")  # a value that starts like this was meant as YAML and must parse
# Prose fields kept verbatim by the fallback (`argument-hint: [issue] [priority]` is common and not YAML).
FREE_TEXT_KEYS = {"description", "argument-hint", "when_to_use", "when-to-use"}


def parse_frontmatter(text: str, path: Path | str | None = None) -> tuple[dict, str]:
    """(fields, body). Text without a leading `---` line has no fields and is all body."""
    where = str(path) if path is not None else "<text>"
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    lines = text.split("\n")
    if lines[0].rstrip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        raise FrontmatterError(f"{where}: frontmatter is not closed (no second '---' line)")
    raw = "\n".join(lines[1:end])
    body = "\n".join(lines[end + 1:]).strip("\n")
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        data = _plain_fields(raw)
        if data is None:
            mark = getattr(e, "problem_mark", None)
            at = f" at line {mark.line + 2}" if mark is not None else ""  # +2: 0-based, after the '---'
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise FrontmatterError(f"{where}: invalid YAML frontmatter{at}: {problem}") from None
    if data is None:
        return {}, body
    if not isinstance(data, dict):
        raise FrontmatterError(f"{where}: frontmatter must be `key: value` lines, got {type(data).__name__}")
    return {str(k): v for k, v in data.items()}, body


def _plain_fields(raw: str) -> dict | None:
    """Lenient `key: value` reading (indented lines continue the previous value); None if it doesn't fit."""
    fields: dict[str, str | list[str]] = {}
    key = None
    for line in raw.split("\n"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0].isspace():
            if key is None:
                return None
            item = line.strip()
            if item.startswith("- ") and (fields[key] == "" or isinstance(fields[key], list)):
                fields[key] = [*(fields[key] or []), item[2:].strip()]  # a block list under the key
            elif isinstance(fields[key], list):
                return None
            else:
                fields[key] = (fields[key] + " " + item).strip()
            continue
        m = _KEY_LINE.match(line)
        if not m:
            return None
        key, value = m.group(1), (m.group(2) or "").strip()
        fields[key] = value
    out = {}
    for k, v in fields.items():
        if isinstance(v, list) or (k in FREE_TEXT_KEYS and not v.startswith(_QUOTED)):
            out[k] = v
            continue
        try:
            parsed = yaml.safe_load(v)
        except yaml.YAMLError:
            if v.startswith(_FLOW_START):  # real YAML syntax that is broken: don't guess
                return None
            parsed = v
        out[k] = parsed if isinstance(parsed, (bool, int, float, list)) else v
    return out


def read_frontmatter_file(path: Path) -> tuple[dict, str]:
    """Read and parse a file; unreadable or undecodable files are FrontmatterErrors too."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise FrontmatterError(f"{path}: cannot read ({e.__class__.__name__}: {e})") from None
    return parse_frontmatter(text, path)


def split_tool_list(value) -> list[str]:
    """`Bash(git log *) Read`, `Read, Grep` or a YAML list -> rule strings; spaces inside (...) kept."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        text, depth, current = str(item), 0, ""
        for ch in text:
            depth += (ch == "(") - (ch == ")")
            if depth <= 0 and (ch == "," or ch.isspace()):
                if current:
                    out.append(current)
                current, depth = "", 0
            else:
                current += ch
        if current.strip():
            out.append(current.strip())
    return out


def as_bool(value, default: bool) -> bool:
    """YAML booleans plus the strings people write ("true", "yes", "false", "no")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "no", "off", "0"):
        return False
    return default


def as_hint(value) -> str | None:
    """argument-hint: `[message]` is YAML for a one-item list; show it the way it was written."""
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return as_text(value)


def as_text(value) -> str | None:
    """A string field: None when absent or empty; numbers and the like become strings."""
    if value is None or isinstance(value, (dict, list)):
        return None
    text = str(value).strip()
    return text or None
