"""The loop's check of a tool call's arguments against the tool's JSON schema, in words the model can act on."""
from __future__ import annotations

import json
from typing import Any


_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list,
          "object": dict, "null": type(None)}


def validate(value: Any, schema: dict, where: str = "") -> str | None:
    """The first violation of `schema` (type, required, enum, properties, items) in words, or None."""
    kinds = schema.get("type")
    if kinds:
        kinds = kinds if isinstance(kinds, list) else [kinds]
        ok = any(isinstance(value, _TYPES[k]) and not (k in ("integer", "number") and isinstance(value, bool))
                 for k in kinds if k in _TYPES)
        if not ok:
            return f"{where or 'input'} must be {' or '.join(kinds)}, got {_json_type(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where or 'input'} must be one of {', '.join(json.dumps(v) for v in schema['enum'])}"
    if isinstance(value, dict):
        for name in schema.get("required") or []:
            if name not in value:
                return f"missing required field '{where + '.' if where else ''}{name}'"
        for name, sub in (schema.get("properties") or {}).items():
            if name in value:
                problem = validate(value[name], sub, f"{where}.{name}" if where else name)
                if problem:
                    return problem
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            problem = validate(item, schema["items"], f"{where}[{i}]")
            if problem:
                return problem
    return None


def _json_type(v: Any) -> str:
    for name, t in (("boolean", bool), ("integer", int), ("number", float), ("string", str), ("array", list),
                    ("object", dict)):
        if isinstance(v, t):
            return name
    return "null" if v is None else type(v).__name__
