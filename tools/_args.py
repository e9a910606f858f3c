"""Argument checking against a tool's JSON schema, tolerant of what small models send.

The schemas are strict for the model's benefit (constrained decoding follows them); at run time
we accept unknown keys (ignored) and numbers or booleans sent as strings, and turn anything else
into one clear error line instead of a KeyError deep inside a tool.
"""
from __future__ import annotations

from typing import Any

_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict}


def check_args(schema: dict, args: Any) -> tuple[dict, str | None]:
    """(cleaned args, None) or ({}, error). Cleaned args hold only schema keys, coerced to their types."""
    if not isinstance(args, dict):
        return {}, f"Arguments must be a JSON object, got {type(args).__name__}."
    props: dict = schema.get("properties", {})
    missing = [k for k in schema.get("required", []) if args.get(k) is None]
    if missing:
        return {}, f"Missing required argument(s): {', '.join(missing)}."
    clean: dict = {}
    for key, spec in props.items():
        if args.get(key) is None:
            continue
        value, error = _coerce(args[key], spec, key)
        if error:
            return {}, error
        clean[key] = value
    return clean, None


def _coerce(value: Any, spec: dict, where: str) -> tuple[Any, str | None]:
    kind = spec.get("type")
    if kind == "integer" and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    elif kind == "integer" and isinstance(value, float) and value.is_integer():
        value = int(value)
    elif kind == "string" and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    elif kind == "boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    expected = _TYPES.get(kind)
    # bool is a subclass of int; a boolean where a number is expected is a mistake.
    if expected and (not isinstance(value, expected) or (kind in ("integer", "number") and isinstance(value, bool))):
        return None, f"Argument {where} must be {'an' if kind[0] in 'aeiou' else 'a'} {kind}, got {type(value).__name__}."
    if "enum" in spec and value not in spec["enum"]:
        return None, f"Argument {where} must be one of {', '.join(map(str, spec['enum']))}; got {value!r}."
    if kind == "integer" and "minimum" in spec and value < spec["minimum"]:
        return None, f"Argument {where} must be at least {spec['minimum']}; got {value}."
    if kind == "array" and "items" in spec:
        items = []
        for i, item in enumerate(value):
            item, error = _coerce(item, spec["items"], f"{where}[{i}]")
            if error:
                return None, error
            items.append(item)
        value = items
    if kind == "object" and "properties" in spec:
        cleaned, error = check_args(spec, value)
        if error:
            return None, f"In {where}: {error}"
        value = cleaned
    return value, None
