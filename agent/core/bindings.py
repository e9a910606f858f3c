"""Tool arguments bound to the environment while decoding (a small model's free loop, under constrained
decoding): Read and Edit name a file that exists, Write a path inside the project, and Edit's old_string is
whole lines of a file already read. The tool list in the prompt stays as it is (the KV prefix holds); only
the grammar narrows (runtime.api.Request.tool_overrides)."""
from __future__ import annotations

from pathlib import Path

from tools._walk import walk_files
from tools.base import ToolContext

MAX_FILES = 300  # a larger project keeps the plain schema (the enum would cost more than it saves)
MAX_READ_CHARS = 200_000  # old_string is bound to the read files' text while it stays this small
# A relative path inside the project: no leading "/" and no "../" at its start.
INSIDE = r"([A-Za-z0-9_]|\.[A-Za-z0-9_])[A-Za-z0-9_. /-]*"


def bound_overrides(schemas: list[dict], ctx: ToolContext) -> dict[str, dict]:
    """tool name -> its parameters schema with file_path (and Edit's old_string) bound; {} when nothing applies."""
    root = Path(ctx.cwd).resolve()
    files = []
    for path in walk_files(root, root):
        files.append(path.relative_to(root).as_posix())
        if len(files) > MAX_FILES:
            return {}
    params = {s["function"]["name"]: s["function"]["parameters"] for s in schemas}
    out: dict[str, dict] = {}
    if files and "Read" in params:
        out["Read"] = _with(params["Read"], file_path={"type": "string", "enum": files})
    if "Write" in params:
        out["Write"] = _with(params["Write"], file_path={"type": "string", "pattern": INSIDE})
    read = [p for p in ctx.read_files if Path(p).is_file()]
    text = "".join(_text(Path(p)) for p in read)
    if read and "Edit" in params and 0 < len(text) <= MAX_READ_CHARS:
        names = [Path(p).resolve().relative_to(root).as_posix() for p in read if Path(p).resolve().is_relative_to(root)]
        if names:
            out["Edit"] = _with(params["Edit"], file_path={"type": "string", "enum": names},
                                old_string={"type": "string", "x-substring-of": text})
    return out


def _with(schema: dict, **properties: dict) -> dict:
    return {**schema, "properties": {**schema.get("properties", {}), **properties}}


def _text(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    return text if text.endswith("\n") else text + "\n"
