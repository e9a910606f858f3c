"""Engine implementations behind runtime.api.Engine, and the factory the CLI uses.

- local: the in-process runtime (runtime.engine.LocalEngine), imported lazily (torch is heavy).
- openai: any OpenAI-compatible /v1/chat/completions endpoint (agent/engines/openai.py).
- scripted: replays a JSON list of assistant turns (agent/engines/scripted.py), for tests.
"""
from __future__ import annotations

from typing import Any

ENGINE_KINDS = ("local", "openai", "scripted")


class EngineError(Exception):
    """An engine cannot be built from the given options; the message is one line."""


def make_engine(kind: str, *, model: str | None = None, script: str | None = None,
                base_url: str | None = None, api_key: str | None = None, **local_options: Any):
    """An Engine of `kind`; raises EngineError with a one-line message when options do not fit."""
    if kind == "scripted":
        from agent.engines.scripted import ScriptedEngine, ScriptError  # only the engine asked for (torch loads in seconds)
        if not script:
            raise EngineError("--engine scripted needs --script FILE (a JSON list of assistant turns)")
        try:
            return ScriptedEngine.from_file(script, name=model or "scripted")
        except ScriptError as e:
            raise EngineError(str(e)) from None
    if kind == "openai":
        from agent.engines.openai import OpenAIEngine  # only the engine asked for (torch loads in seconds)
        if not base_url:
            raise EngineError("--engine openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        if not model:
            raise EngineError("--engine openai needs --model (the name the server knows the model by)")
        return OpenAIEngine(base_url=base_url, model=model, api_key=api_key)
    if kind == "local":
        try:
            from runtime.engine import LocalEngine  # only the engine asked for (torch loads in seconds)
        except ImportError as e:
            raise EngineError(f"the local engine is not available ({e}); use --engine openai or scripted") from None
        try:
            return LocalEngine.from_spec(model, **local_options)
        except Exception as e:  # model not found, bad GGUF, out of memory: one line, not a traceback
            raise EngineError(f"cannot load model {model or '(default)'}: {e}") from None
    raise EngineError(f"unknown engine {kind!r}; choose one of {', '.join(ENGINE_KINDS)}")
