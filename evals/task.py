"""Eval tasks: a folder with task.yaml, fixture/ and verify.py; loading, selection and preparing a copy.

task.yaml keys (only `prompt` is required):
  prompt: str                 what the user asks
  tags: [str]                 what the task exercises (read, edit, shell, deny, plan, skill, ...)
  max_turns: int              --max-turns (default 8)
  timeout: int                seconds per prompt, passed as --max-time (default 300)
  permission_mode: str        --permission-mode
  allowed_tools: [str]        --allowedTools rules
  disallowed_tools: [str]     --disallowedTools rules
  settings: {...}             written to .agent/settings.json in the copy
  setup: [str]                shell commands run in the copy before the agent (e.g. git commits)
  follow_up: str              a second prompt, run in a second process that resumes the session
  resume: resume | continue   how the follow-up finds the session (default resume: --resume ID)
  between: [str]              shell commands run between the two prompts
  script: [...]               scripted-engine turns for the first prompt (CI smoke runs)
  follow_up_script: [...]     scripted-engine turns for the follow-up
  bare_files: [str]           bench/bare_vs_agent.py: the fixture files shown to the bare model
  bare_target: str            ... and the one its code block replaces (one of bare_files)

The category of a task is its first tag in CATEGORIES; reports group by it.
"""
from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
# `agent eval --suite NAME`; heldout/ is for reporting only: nobody tunes prompts or the harness on it.
SUITES = {"tasks": TASKS_DIR, "heldout": TASKS_DIR.parent / "heldout"}
CATEGORIES = ("stub", "bugfix", "config", "answer", "rename", "shell")
KNOWN_KEYS = frozenset({"prompt", "tags", "max_turns", "timeout", "permission_mode", "allowed_tools",
                        "disallowed_tools", "settings", "setup", "follow_up", "resume", "between", "script",
                        "follow_up_script", "bare_files", "bare_target"})
# Fixed identity and dates so setup commits (and their hashes) are the same on every machine.
GIT_ENV = {"GIT_AUTHOR_NAME": "Eval Fixture", "GIT_AUTHOR_EMAIL": "eval@example.invalid",
           "GIT_COMMITTER_NAME": "Eval Fixture", "GIT_COMMITTER_EMAIL": "eval@example.invalid",
           "GIT_AUTHOR_DATE": "2024-01-02T03:04:05+00:00", "GIT_COMMITTER_DATE": "2024-01-02T03:04:05+00:00",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


class TaskError(Exception):
    """A task folder cannot be used; the message is one line naming the file and the problem."""


@dataclass
class Task:
    name: str
    dir: Path
    prompt: str
    tags: list[str] = field(default_factory=list)
    max_turns: int = 8
    timeout: int = 300
    permission_mode: str | None = None
    allowed_tools: list[str] = field(default_factory=list)
    disallowed_tools: list[str] = field(default_factory=list)
    settings: dict | None = None
    setup: list[str] = field(default_factory=list)
    follow_up: str | None = None
    resume: str = "resume"
    between: list[str] = field(default_factory=list)
    script: list | None = None
    follow_up_script: list | None = None
    bare_files: list[str] = field(default_factory=list)
    bare_target: str | None = None

    @property
    def category(self) -> str | None:
        return next((tag for tag in self.tags if tag in CATEGORIES), None)

    @property
    def fixture(self) -> Path:
        return self.dir / "fixture"

    @property
    def prompts(self) -> list[str]:
        return [self.prompt] + ([self.follow_up] if self.follow_up else [])

    def scripts(self) -> list[list | None]:
        return [self.script] + ([self.follow_up_script] if self.follow_up else [])


def load_task(task_dir: Path) -> Task:
    """The task in `task_dir`; raises TaskError for a missing file or a bad key."""
    task_dir = Path(task_dir)
    spec_path = task_dir / "task.yaml"
    try:
        spec = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    except OSError as e:
        raise TaskError(f"{spec_path}: cannot read it ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise TaskError(f"{spec_path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("prompt"), str) or not spec["prompt"].strip():
        raise TaskError(f"{spec_path}: needs a non-empty `prompt` string")
    unknown = sorted(set(spec) - KNOWN_KEYS)
    if unknown:
        raise TaskError(f"{spec_path}: unknown key(s) {', '.join(unknown)}")
    if not (task_dir / "verify.py").is_file():
        raise TaskError(f"{task_dir}: verify.py is missing")
    if not (task_dir / "fixture").is_dir():
        raise TaskError(f"{task_dir}: fixture/ is missing")
    task = Task(name=task_dir.name, dir=task_dir.resolve(), **spec)
    _check_types(task, spec_path)
    return task


def _check_types(task: Task, where: Path) -> None:
    def need(ok: bool, what: str) -> None:
        if not ok:
            raise TaskError(f"{where}: {what}")

    need(isinstance(task.max_turns, int) and task.max_turns >= 1, "max_turns must be a positive integer")
    need(isinstance(task.timeout, (int, float)) and task.timeout > 0, "timeout must be a positive number")
    for key in ("tags", "allowed_tools", "disallowed_tools", "setup", "between", "bare_files"):
        value = getattr(task, key)
        need(isinstance(value, list) and all(isinstance(v, str) for v in value), f"{key} must be a list of strings")
    need(task.settings is None or isinstance(task.settings, dict), "settings must be a mapping")
    need(task.follow_up is None or isinstance(task.follow_up, str), "follow_up must be a string")
    need(task.resume in ("resume", "continue"), "resume must be `resume` or `continue`")
    need(task.follow_up is not None or not (task.between or task.follow_up_script),
         "between and follow_up_script need a follow_up")
    for key in ("script", "follow_up_script"):
        need(getattr(task, key) is None or isinstance(getattr(task, key), list), f"{key} must be a list of turns")
    need(task.bare_target is None or task.bare_target in task.bare_files, "bare_target must be one of bare_files")
    need(not task.bare_files or task.bare_target is not None, "bare_files needs a bare_target")
    missing = [f for f in task.bare_files if not (task.fixture / f).is_file()]
    need(not missing, f"bare_files not in fixture/: {', '.join(missing)}")


def discover(tasks_dir: Path = TASKS_DIR, patterns: list[str] | None = None) -> tuple[list[Task], list[str]]:
    """(tasks whose name matches any glob in `patterns`, sorted by name; one-line errors for broken ones)."""
    tasks: list[Task] = []
    errors: list[str] = []
    if not Path(tasks_dir).is_dir():
        return [], [f"no tasks directory at {tasks_dir}"]
    for d in sorted(p for p in Path(tasks_dir).iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        if patterns and not any(fnmatch.fnmatchcase(d.name, p) for p in patterns):
            continue
        try:
            tasks.append(load_task(d))
        except TaskError as e:
            errors.append(str(e))
    return tasks, errors


def prepare(task: Task, dest: Path) -> Path:
    """Copy the fixture to `dest`, write the task's settings and run its setup commands; returns `dest`."""
    shutil.copytree(task.fixture, dest, symlinks=True)
    if task.settings is not None:
        settings = dest / ".agent" / "settings.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps(task.settings, indent=2) + "\n", encoding="utf-8")
    run_commands(task.setup, dest, "setup")
    return dest


def run_commands(commands: list[str], cwd: Path, what: str) -> None:
    for command in commands:
        r = subprocess.run(["bash", "-c", command], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            detail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            raise TaskError(f"{what} command {command!r} failed with exit code {r.returncode}: {detail[0]}")


def load_verifier(task: Task) -> Callable[[Any], Any]:
    """The task's `verify(run)` function, loaded from its verify.py."""
    path = task.dir / "verify.py"
    spec = importlib.util.spec_from_file_location(f"evals_verify_{task.name.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise TaskError(f"{path}: cannot load it ({type(e).__name__}: {e})") from None
    verify = getattr(module, "verify", None)
    if not callable(verify):
        raise TaskError(f"{path}: defines no verify(run) function")
    return verify
