"""Collateral changes in a rewritten config file: keys the rewrite removed or changed that the request does not
mention. A small model rewriting a JSON file whole changed neighbouring keys (docs/EVALS.md); Python files have
their own check (checks.lost_definitions)."""
from __future__ import annotations

import configparser
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from agent.pipeline.checks import REMOVES

MAX_REPORTED = 4


def collateral_changes(request: str, path: Path, before: str | None, after: str) -> list[str]:
    """Dotted keys whose value the rewrite changed or removed although the request names neither the key nor
    the new value ([] for new files, other formats, unparseable text, or a request to remove or rewrite)."""
    load = _LOADERS.get(path.suffix.lower())
    if load is None or before is None or REMOVES.search(request):
        return []
    try:
        old, new = _flatten(load(before)), _flatten(load(after))
    except Exception:  # noqa: BLE001 - any parser's error: the parse guard reports broken files
        return []
    words = _words(request)
    out = []
    for key, value in old.items():
        if key in new and new[key] == value:
            continue
        named = any(_norm(part) in words for part in key.split(".") if not part.isdigit())
        if not named and not (key in new and str(new[key]).lower() in request.lower()):
            out.append(key)
    return out[:MAX_REPORTED]


def _words(request: str) -> set[str]:
    """The request's words, and its runs of two or three words joined (for `pool size` -> pool_size)."""
    tokens = [t.lower() for t in re.findall(r"[A-Za-z0-9]+", request)]
    out = set(tokens)
    for n in (2, 3):
        out.update("".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
    out.update(_norm(t) for t in re.findall(r"[\w.-]+", request))
    return out


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out if out or not prefix else {prefix: {}}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}.{i}"))
        return out
    return {prefix: value}


def _ini(text: str) -> dict:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    return {s: dict(parser[s]) for s in parser.sections()} | ({"DEFAULT": dict(parser.defaults())}
                                                              if parser.defaults() else {})


_LOADERS = {".json": json.loads, ".yaml": yaml.safe_load, ".yml": yaml.safe_load, ".toml": tomllib.loads,
            ".ini": _ini, ".cfg": _ini}
