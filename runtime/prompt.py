"""Messages -> prompt token ids, keeping special tokens out of content and the session prefix stable.

Contents (message text, tool-call arguments, tool schemas) are rendered as unique markers, so the
rendered template splits into glue (the template's own text, encoded with special tokens) and
contents (encoded as ordinary text). A file containing "<|im_start|>" therefore stays text.

Incremental builds keep the KV invariant: the previous call's tokens (prompt + the tokens the
model generated + end-of-turn glue) are kept verbatim and only messages after the assistant reply
are rendered, relying on render(msgs[:n]) being a text prefix of render(msgs). That is checked
every time; where it fails the prompt is re-rendered in full and flagged.
"""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field

from runtime.chat_template import ChatTemplate, TemplateError, tojson
from runtime.tokenizer import Tokenizer


@dataclass
class PromptState:
    """What the engine keeps after a call: the messages it rendered and the session's tokens since."""
    messages: list[dict]
    tools: list[dict]
    tokens: list[int]  # rendered prompt + the generated reply + end-of-turn glue (see PromptBuilder.end_of_turn)


@dataclass
class BuiltPrompt:
    tokens: list[int]
    kept: int  # leading tokens identical to the previous state's tokens
    rerendered: bool  # True when rendered from scratch instead of extended
    reason: str | None = None  # why a previous state could not be extended


class _Marked(dict):
    """A dict rendered by tojson as a marker; the JSON text it stands for goes into `sink`."""

    def __init__(self, value: dict, marker: str, sink: dict[str, str]):
        super().__init__(value)
        self.marker, self.sink = marker, sink


def _marking_tojson(x, **kwargs) -> str:
    if isinstance(x, _Marked):
        x.sink[x.marker] = tojson(dict(x), **kwargs)
        return x.marker
    return tojson(x, **kwargs)


@dataclass
class _Rendered:
    text: str  # template output with markers in place of contents
    contents: dict[str, str] = field(default_factory=dict)  # marker -> content text


class PromptBuilder:
    def __init__(self, template: ChatTemplate, tokenizer: Tokenizer):
        self.template = template
        self.tokenizer = tokenizer
        self._marked_template = template.with_tojson(_marking_tojson)
        nonce = secrets.token_hex(8)  # contents cannot contain markers they cannot guess
        self._marker = "\ue000" + nonce + "{}\ue001"
        self._marker_re = re.compile("\ue000" + nonce + "([^\ue001]*)\ue001")
        self._end_of_turn = self._end_of_turn_glue()

    def render_tokens(self, messages: list[dict], tools: list[dict] | None = None,
                      add_generation_prompt: bool = True) -> list[int]:
        """The whole prompt: glue with special tokens, every content as ordinary text."""
        rendered = self._render(messages, tools or [], add_generation_prompt)
        self._check_faithful(rendered, messages, tools or [], add_generation_prompt)
        return self._encode(rendered.text, rendered.contents)

    def build(self, messages: list[dict], tools: list[dict] | None = None,
              prev: PromptState | None = None) -> BuiltPrompt:
        """Prompt tokens for `messages` (generation prompt added), extending `prev` where it is a prefix."""
        tools = tools or []
        reason = self._extend_blocker(messages, tools, prev) if prev else None
        if prev and reason is None:
            n = len(prev.messages)
            prompt = self._render(messages[:n], tools, True)  # what prev's prompt was rendered from
            turn = self._render(messages[:n + 1], tools, False)  # ... plus the assistant reply we generated
            full = self._render(messages, tools, True)
            if not (turn.text.startswith(prompt.text) and full.text.startswith(turn.text)):
                reason = "the chat template is not prefix-stable for these messages"
            else:
                self._check_faithful(full, messages, tools, True)
                tail = self._encode(full.text[len(turn.text):], full.contents)
                return BuiltPrompt(list(prev.tokens) + tail, kept=len(prev.tokens), rerendered=False)
        tokens = self.render_tokens(messages, tools, True)
        kept = _common_prefix(tokens, prev.tokens) if prev else 0
        return BuiltPrompt(tokens, kept=kept, rerendered=True, reason=reason)

    def end_of_turn(self, generated: list[int]) -> list[int]:
        """Glue ids to append after a generated reply (which may already end with some of it, e.g. <|im_end|>)."""
        glue = self._end_of_turn
        for k in range(min(len(glue), len(generated)), 0, -1):
            if generated[-k:] == glue[:k]:
                return glue[k:]
        return list(glue)

    # --- internals ---------------------------------------------------------------------------

    def _extend_blocker(self, messages: list[dict], tools: list[dict], prev: PromptState) -> str | None:
        n = len(prev.messages)
        if tools != prev.tools:
            return "the tool list changed"
        if messages[:n] != prev.messages:
            return "earlier messages changed"
        if len(messages) <= n or messages[n].get("role") != "assistant":
            return "no assistant reply follows the previous prompt"
        return None

    def _render(self, messages: list[dict], tools: list[dict], add_generation_prompt: bool) -> _Rendered:
        out = _Rendered("")
        marked_messages = []
        for i, message in enumerate(messages):
            m = dict(message)
            if isinstance(m.get("content"), str) and m["content"]:  # "" stays "": templates test its truth
                marker = self._marker.format(f"c{i}")
                out.contents[marker] = m["content"]
                m["content"] = marker
            if m.get("tool_calls"):
                m["tool_calls"] = [self._mark_call(call, f"a{i}.{j}", out.contents) for j, call in enumerate(m["tool_calls"])]
            marked_messages.append(m)
        marked_tools = [_Marked(t, self._marker.format(f"t{k}"), out.contents) for k, t in enumerate(tools)]
        out.text = self._marked_template.render(marked_messages, marked_tools, add_generation_prompt)
        return out

    def _mark_call(self, call: dict, key: str, sink: dict[str, str]) -> dict:
        call = dict(call)
        fn = call.get("function")
        target = dict(fn) if isinstance(fn, dict) else call
        if isinstance(target.get("arguments"), dict):
            target["arguments"] = _Marked(target["arguments"], self._marker.format(key), sink)
        if isinstance(fn, dict):
            call["function"] = target
        return call

    def _check_faithful(self, rendered: _Rendered, messages: list[dict], tools: list[dict], gen: bool) -> None:
        """Substituting contents back must give exactly the plain rendering, or the template transforms contents."""
        plain = self.template.render(messages, tools, gen)
        if self._marker_re.sub(lambda m: rendered.contents[m.group(0)], rendered.text) != plain:
            raise TemplateError("the chat template transforms message contents, so they cannot be kept apart from "
                                "its special tokens; this template is not supported")

    def _encode(self, text: str, contents: dict[str, str]) -> list[int]:
        tokens: list[int] = []
        pos = 0
        for m in self._marker_re.finditer(text):
            if m.start() > pos:
                tokens += self.tokenizer.encode_with_specials(text[pos:m.start()])
            tokens += self.tokenizer.encode(contents[m.group(0)])
            pos = m.end()
        if pos < len(text):
            tokens += self.tokenizer.encode_with_specials(text[pos:])
        return tokens

    def _end_of_turn_glue(self) -> list[int]:
        """The template's text after an assistant reply's content (Qwen: '<|im_end|>\\n'), as ids."""
        messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
        text = self._render(messages, [], False).text
        marker = self._marker.format("c1")
        if marker not in text:
            raise TemplateError("the chat template does not render assistant messages; it cannot hold a conversation")
        return self.tokenizer.encode_with_specials(text.split(marker)[-1])


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
