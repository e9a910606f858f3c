"""The files a request is about, as the model sees them in the first message: raw text for a rewrite, Read's
numbered lines otherwise, a long file's region around the hits."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.core import model_text as mt
from agent.core.loop import Agent
from agent.pipeline import windows
from agent.pipeline.localize import Localization
from tools._files import remember
from tools.read import ReadTool

ATTACH_MAX_LINES = 400  # a longer file is attached as its region around the hits
REGION_CONTEXT = 12  # lines shown around each hit of a long file


def attachments(driver: Any, agent: Agent, files: list[Path], loc: Localization, *, raw: bool) -> str:
    """The files as the model sees them: raw text for a rewrite, Read's numbered lines otherwise. Each
    counts as read (Write and Edit may then change it)."""
    blocks = []
    for path in files:
        name = driver.rel(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if text.count("\n") > ATTACH_MAX_LINES:
            blocks.append(mt.attached_file(name, windows.region(text, loc.hits.get(path, []), REGION_CONTEXT)))
        elif raw:
            blocks.append(mt.file_block(name, text))
        else:
            blocks.append(mt.attached_file(name, ReadTool().run({"file_path": str(path)}, agent.ctx).content))
        remember(agent.ctx, path)
    return "\n\n".join(blocks)
