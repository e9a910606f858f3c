"""SessionOptions: what a client asks of a session, as typed values (the CLI fills them from its flags)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


class BuildError(Exception):
    """A session cannot be built from these options (bad mode, unknown session id); one line."""


@dataclass
class SessionOptions:
    project: Path
    engine: str = "local"
    model: str | None = None
    script: str | None = None
    base_url: str | None = None
    max_turns: int = 50
    max_time: float | None = None
    allowed: list[str] = field(default_factory=list)
    disallowed: list[str] = field(default_factory=list)
    permission_mode: str | None = None
    system_prompt: str | None = None
    append_system_prompt: str | None = None
    continue_: bool = False
    resume: str | None = None
    speculation: bool = True  # False: off whatever the settings say (--no-speculation)
    constrained_tools: bool = True  # False: off whatever the settings say (--no-constrained-tools)
    initial_prompt: str | None = None  # `agent "fix the tests"` opens the UI and sends it
    auto_compact_threshold: float | None = None  # share of the context window; None: settings or 0.8
    headless: bool = False  # `agent -p`: nobody answers permission prompts; ExitPlanMode ends the run
    verbose: bool = False  # headless: progress and notices on stderr
    tries: int | None = None  # --tries: candidates per retried edit step (None: settings, then the profile)
    sandbox: str | None = None  # --sandbox on|off|auto (None: the settings' sandbox block)

    def __post_init__(self) -> None:
        self.project = Path(self.project).expanduser().resolve()
        assert self.max_turns >= 1, "--max-turns must be at least 1"
