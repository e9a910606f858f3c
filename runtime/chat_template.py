"""The model's own Jinja chat template, rendered the way Hugging Face's apply_chat_template does."""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Callable

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class TemplateError(Exception):
    """The chat template is missing, does not compile, or raised while rendering."""


def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators=None, sort_keys: bool = False) -> str:
    """HF's override of Jinja's tojson: no HTML escaping, non-ASCII kept, indent/separators supported."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str):
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class ChatTemplate:
    """A compiled chat template; `render` mirrors apply_chat_template(tokenize=False)."""

    def __init__(self, source: str | None, special_tokens: dict[str, str] | None = None,
                 tojson_filter: Callable[..., str] = tojson):
        if not source:
            raise TemplateError("the model has no chat template (tokenizer.chat_template); use a GGUF that embeds one")
        self.source = source
        self.special_tokens = dict(special_tokens or {})  # bos_token, eos_token, ... as HF passes them
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.filters["tojson"] = tojson_filter
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        try:
            self._template = env.from_string(source)
        except jinja2.TemplateSyntaxError as e:
            raise TemplateError(f"chat template does not compile: {e.message} (line {e.lineno})") from None

    def render(self, messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = False,
               **extra: Any) -> str:
        try:
            return self._template.render(messages=messages, tools=tools or None, documents=None,
                                         add_generation_prompt=add_generation_prompt,
                                         **self.special_tokens, **extra)
        except jinja2.TemplateError as e:
            raise TemplateError(f"chat template failed: {e}") from None

    def with_tojson(self, tojson_filter: Callable[..., str]) -> "ChatTemplate":
        """The same template with another tojson filter (runtime.prompt wraps values to find their spans)."""
        return ChatTemplate(self.source, self.special_tokens, tojson_filter)
