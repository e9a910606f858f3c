"""ModelProfile: per-model behaviour as data (agent/core/profiles.yaml), chosen once from the model.

The loop, the context builder and the harness read profile fields; nothing else asks how big the
model is. Selection: an explicit profile from settings, else the first profile in profiles.yaml
whose `match` fits the model's parameter count (unknown for HTTP engines, which match only `{}`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PROFILES_FILE = Path(__file__).with_name("profiles.yaml")
TOOL_POLICIES = ("always", "when_user_skills", "when_asked")
CONTROLS = ("react", "pipeline")


class ProfileError(ValueError):
    """A profile in profiles.yaml or settings is malformed; the message is one line."""


@dataclass(frozen=True)
class ModelProfile:
    name: str = "default"
    core_tools: tuple[str, ...] | None = None  # the only tools offered; None = every tool
    read_window: int | None = None  # lines a Read shows at most; None = Read's own default
    request_reminder: bool = False  # restate the request after each round of tool results
    repeated_read_note: bool = False  # a first identical repeat of a Read gets a note instead of running
    answer_on_first_repeat: bool = False  # a repeated read-only call leads to a text-only turn without a warning first
    env_project_files: bool = False  # <env> lists the project's files instead of the working directory
    builtin_index: bool = True  # the built-in skills and agents appear in the first message's index
    skill_tool: str = "always"  # "always" | "when_user_skills": Skill offered only with a project or user skill
    task_tool: str = "always"  # "always" | "when_asked": headless, Task offered only when the request asks for it
    control: str = "react"  # "react": the model drives; "pipeline": the harness does (agent/pipeline)
    repairs: int = 2  # pipeline: tries after a change fails its check, each from a clean prefix
    tries: int = 1  # pipeline: candidates sampled together at a retry, checked, one kept (--tries, "tries")
    batches: int = 1  # pipeline: batches of `tries` candidates one round may draw while none has passed
    stub_batches: int = 1  # pipeline: the same for a fresh look at a file with stubs
    bind_arguments: bool = False  # free loop: file paths and old_string bound to the project while decoding
    oracle: bool = False  # pipeline: the model judges a failing test's traced calls to pick the file (oracle.py)
    fresh_look: bool = False  # pipeline: a failed first round of candidates is followed by one in the bare shape
    focus: bool = False  # pipeline: a round's nearest miss gets the definition its failing test reaches rewritten
    mutants: bool = False  # pipeline: a failure no round fixed gets one-expression changes, checked (mutants.py)

    def __post_init__(self) -> None:
        if self.read_window is not None and self.read_window < 1:
            raise ProfileError(f"profile {self.name}: read_window must be a positive number of lines")
        for key in ("skill_tool", "task_tool"):
            if getattr(self, key) not in TOOL_POLICIES:
                raise ProfileError(f"profile {self.name}: {key} must be one of {', '.join(TOOL_POLICIES)}")
        if self.control not in CONTROLS:
            raise ProfileError(f"profile {self.name}: control must be one of {', '.join(CONTROLS)}")
        if not isinstance(self.tries, int) or not 1 <= self.tries <= 16:
            raise ProfileError(f"profile {self.name}: tries must be a whole number from 1 to 16")
        for key in ("batches", "stub_batches"):
            if not isinstance(getattr(self, key), int) or not 1 <= getattr(self, key) <= 8:
                raise ProfileError(f"profile {self.name}: {key} must be a whole number from 1 to 8")
        if not isinstance(self.repairs, int) or self.repairs < 0:
            raise ProfileError(f"profile {self.name}: repairs must be a whole number >= 0")
        for key in ("oracle", "fresh_look", "focus", "mutants"):
            if not isinstance(getattr(self, key), bool):
                raise ProfileError(f"profile {self.name}: {key} must be true or false")

    def offers(self, tool_name: str, mode: str) -> bool:
        """Whether the core tool set includes `tool_name` (ExitPlanMode only in plan mode)."""
        if self.core_tools is None:
            return True
        return tool_name in self.core_tools and (tool_name != "ExitPlanMode" or mode == "plan")


FIELDS = {f.name for f in dataclasses.fields(ModelProfile)}


def make_profile(entry: dict[str, Any], where: str) -> ModelProfile:
    unknown = set(entry) - FIELDS - {"match"}
    if unknown:
        raise ProfileError(f"{where}: unknown profile field(s) {', '.join(sorted(unknown))}")
    values = {k: v for k, v in entry.items() if k != "match"}
    if isinstance(values.get("core_tools"), list):
        values["core_tools"] = tuple(values["core_tools"])
    try:
        return ModelProfile(**values)
    except TypeError as e:
        raise ProfileError(f"{where}: {e}") from None


def load_profiles(path: Path = PROFILES_FILE) -> list[tuple[dict, ModelProfile]]:
    """[(match, profile)] in file order."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    out = []
    for i, entry in enumerate(data.get("profiles") or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("match", {}), dict):
            raise ProfileError(f"{path}: profile #{i + 1} must be a mapping with a `match` mapping")
        out.append((entry.get("match") or {}, make_profile(entry, f"{path} profile #{i + 1}")))
    return out


def _fits(match: dict, parameters: int | None) -> bool:
    if "max_params" in match:
        return parameters is not None and parameters < match["max_params"]
    return True


def choose_profile(parameters: int | None, override: str | dict | None = None,
                   profiles: list[tuple[dict, ModelProfile]] | None = None) -> ModelProfile:
    """The profile for a model of `parameters` (None: unknown), with the settings' `modelProfile` applied."""
    profiles = load_profiles() if profiles is None else profiles
    by_name = {p.name: p for _, p in profiles}
    if isinstance(override, str):
        override = {"name": override}
    base = None
    if override and override.get("name"):
        base = by_name.get(override["name"])
        if base is None:
            raise ProfileError(f"modelProfile: no profile named {override['name']!r} "
                               f"(known: {', '.join(by_name)})")
    if base is None:
        base = next((p for match, p in profiles if _fits(match, parameters)), ModelProfile())
    fields = {k: v for k, v in (override or {}).items() if k != "name"}
    if not fields:
        return base
    return make_profile({**dataclasses.asdict(base), **fields}, "modelProfile")


def model_parameters(engine: Any) -> int | None:
    """Approximate parameter count of an in-process model (from its config); None when unknown (HTTP engines)."""
    config = getattr(getattr(engine, "model", None), "config", None)
    try:
        hidden, layers, ffn, vocab = config.hidden_size, config.num_layers, config.intermediate_size, config.vocab_size
        q = config.num_heads * config.head_dim
        kv = config.num_kv_heads * config.head_dim
    except AttributeError:
        return None
    per_layer = hidden * q + 2 * hidden * kv + q * hidden + 3 * hidden * ffn
    return vocab * hidden * (1 if config.tie_embeddings else 2) + layers * per_layer
