"""Constrained tool calls: once the model commits to a call, decoding is masked so the call is valid.

Tagged calls (the Qwen template's form): after the `<tool_call>` token the text must be "\\n" +
{"name": <an offered tool>, "arguments": <that tool's parameters>} + "\\n" (compact separators, as
json.dumps writes them), then the `</tool_call>` token, the only token that grammar ends on. After
the close only "\\n", another `<tool_call>` or an end-of-turn token may follow (text after a call
would be the model imagining its result).

Bare calls: small models often drop the tags and reply with nothing but the call object, fenced
(```json ...```) or not; the parser's bare-call fallback (runtime.toolcalls) accepts such a reply.
While a reply's text can still become `{"name"` (after optional whitespace and a ```json fence),
nothing is masked; once it reaches the "name" key the model has committed, and the rest is masked
to a valid call (any whitespace, bounded), the closing fence when it opened one, and end of turn.
A reply that starts any other way is never masked (a JSON answer with other keys stays free).

Per step, a request may narrow the grammar (runtime.api.Request): `allowed_tools` (the only names a call may
take; the prompt still lists every tool, so the KV prefix holds), `tool_overrides` (a schema per tool used
instead of its own, e.g. an enum of existing files; `x-substring-of` binds a string to whole lines of a text,
runtime.substring_grammar) and tool_choice "required" (REQUIRED: the reply's first token is `<tool_call>`,
the template's own opening, so the reply is a tagged call and never text or a bare call).

A call whose text turns into a loop (the last RUNAWAY_WINDOW tokens one unit of at most RUNAWAY_PERIOD
tokens repeated, e.g. a Write `content` repeating two markdown lines until max_tokens) sets `runaway` to a
one-line reason; the engine then stops the reply and returns the call as an error.

Grammars are xgrammar's, compiled once per distinct tool list (keyed by a hash of the names and
parameter schemas) in a background thread, so the compile overlaps prefill; a generation waits
only when the model actually commits to a call. The bare-call grammars compile after the tagged one,
which a reply needs first and most often. Tool schemas xgrammar cannot compile fall back to
a looser grammar (known name, any JSON object as arguments); if even that fails, or xgrammar is
missing, decoding runs unconstrained and `error` says why.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import regex
import torch

from runtime.substring_grammar import split_placeholders, substitute
from runtime.tokenizer import Tokenizer

log = logging.getLogger(__name__)

# Constraint states.
REQUIRED = "required"  # tool_choice "required", nothing generated yet: only <tool_call>
START = "start"  # the reply so far could still become a bare call; nothing masked
TEXT = "text"  # ordinary text; nothing masked
CALL = "call"  # inside <tool_call> ... </tool_call>
AFTER_CALL = "after_call"  # just closed a tagged call: "\n", <tool_call> or end of turn
AFTER_CALL_NL = "after_call_nl"  # ... and a "\n": <tool_call> or end of turn
BARE = "bare"  # inside a committed bare call

_BARE_OPEN = regex.compile(r'\s*(```(?:json)?[ \t]*\n\s*)?\{\s*"name"')
_MAX_WHITESPACE = 24  # longest whitespace run inside a bare call (pretty-printed nesting, no runaway)
_CACHE_SIZE = 16  # compiled tool lists kept; a session keeps one list for its whole life
RUNAWAY_WINDOW = 256  # a call's last this-many tokens all one repeated unit: a loop, not content
RUNAWAY_PERIOD = 64  # ... of at most this many tokens (a 0.5B repeated a 40-token sentence inside new_string)
RUNAWAY_REPEATS = 5  # ... seen at least this many times (a long unit needs more than the window)


def tool_call_schema(tools: list[dict]) -> dict:
    """The JSON schema of one call: an anyOf with one {"name": const, "arguments": parameters} per tool."""
    cases = []
    for t in tools:
        fn = t.get("function", t)
        params = fn.get("parameters") or {"type": "object"}
        cases.append({"type": "object", "properties": {"name": {"const": fn["name"]}, "arguments": params},
                      "required": ["name", "arguments"], "additionalProperties": False})
    return {"anyOf": cases}


def grammar_tools(tools: list[dict], allowed: list[str] | None = None,
                  overrides: dict[str, dict] | None = None) -> list[dict]:
    """The tools a call may name under the grammar: `tools` narrowed to `allowed` (None: all), each with its
    parameters replaced by overrides[name] where one is given (the prompt keeps showing the originals)."""
    out = []
    for t in tools:
        fn = t.get("function", t)
        if allowed is None or fn["name"] in allowed:
            params = (overrides or {}).get(fn["name"], fn.get("parameters"))
            out.append({"type": "function", "function": {"name": fn["name"], "parameters": params}})
    return out


def _loose_schema(tools: list[dict]) -> dict:
    names = [t.get("function", t)["name"] for t in tools]
    return {"type": "object", "properties": {"name": {"enum": names}, "arguments": {"type": "object"}},
            "required": ["name", "arguments"], "additionalProperties": False}


def tools_key(tools: list[dict]) -> str:
    """Hash of what the grammars depend on: tool names and parameter schemas (not descriptions)."""
    shape = [(t.get("function", t)["name"], t.get("function", t).get("parameters")) for t in tools]
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()


@dataclass
class Compiled:
    tagged: object  # xgrammar.CompiledGrammar: "\n" call "\n", ends on </tool_call>
    bare: Future  # of (bare, bare_fenced): call (from its "{") then "\n"?; call then "\n"? "```" "\n"?
    loose: bool  # True when the full schemas did not compile and names-only checking is used
    seconds: float  # compiling the tagged grammar


class ToolGrammars:
    """Per model vocabulary: xgrammar's tokenizer info and compiler, and compiled call grammars by tool list."""

    def __init__(self, tokenizer: Tokenizer, vocab_size: int):
        self.tokenizer, self.vocab_size = tokenizer, vocab_size
        self.usable = tokenizer.tool_call_start_id is not None and tokenizer.tool_call_end_id is not None
        self._compiler = None
        self._futures: OrderedDict[str, Future] = OrderedDict()
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grammar")
        self._openers: torch.Tensor | None = None

    def prepare(self, tools: list[dict]) -> Future:
        """A future of the Compiled grammars for `tools`; compiled in the background on first sight."""
        key = tools_key(tools)
        with self._lock:
            if key in self._futures:
                self._futures.move_to_end(key)
                return self._futures[key]
            future = self._executor.submit(self._compile, [dict(t) for t in tools])
            self._futures[key] = future
            while len(self._futures) > _CACHE_SIZE:
                self._futures.popitem(last=False)
            return future

    def call_openers(self) -> torch.Tensor:
        """Ids of tokens whose text starts (after blanks) with `{`, `[` or a backtick; computed once."""
        if self._openers is None:
            self._openers = _call_openers(self.tokenizer)
        return self._openers

    def constraint(self, tools: list[dict], *, required: bool = False) -> "ToolCallConstraint":
        """A fresh per-generation constraint: the reply starts outside any call, or (required) must open one."""
        return ToolCallConstraint(self, self.prepare(tools), required=required)

    def _compile(self, tools: list[dict]) -> Compiled:
        import xgrammar as xgr  # slow to import: only paid when tools are offered

        t0 = time.perf_counter()
        if self._compiler is None:
            self._compiler = xgr.GrammarCompiler(self._tokenizer_info(xgr), max_threads=1)
        try:
            grammars, loose = self._grammars(xgr, tool_call_schema(tools)), False
        except Exception as e:  # a schema feature xgrammar does not support: keep the names, loosen the arguments
            log.warning("tool schemas do not compile to a grammar (%s); constraining names only", e)
            grammars, loose = self._grammars(xgr, _loose_schema(tools)), True
        tagged, bare, fenced = grammars
        tagged = self._compiler.compile_grammar(tagged)
        seconds = time.perf_counter() - t0
        later = self._executor.submit(lambda: (self._compiler.compile_grammar(bare), self._compiler.compile_grammar(fenced)))
        return Compiled(tagged, later, loose, seconds)

    @staticmethod
    def _grammars(xgr, schema: dict) -> tuple:
        placed, texts = split_placeholders(schema)

        def from_schema(**kw):
            g = xgr.Grammar.from_json_schema(placed, strict_mode=True, **kw)
            return xgr.Grammar.from_ebnf(substitute(str(g), texts)) if texts else g

        compact = from_schema(any_whitespace=False, separators=(", ", ": "))
        spaced = from_schema(any_whitespace=True, max_whitespace_cnt=_MAX_WHITESPACE)
        newline = xgr.Grammar.from_ebnf('root ::= "\\n"')
        return (xgr.Grammar.concat(newline, compact, newline),
                xgr.Grammar.concat(spaced, xgr.Grammar.from_ebnf('root ::= "\\n"?')),
                xgr.Grammar.concat(spaced, xgr.Grammar.from_ebnf('root ::= "\\n"? "```" "\\n"?')))

    def _tokenizer_info(self, xgr):
        """Raw token bytes; special tokens get empty bytes, which xgrammar never lets text match."""
        tok = self.tokenizer
        vocab = [b"" if tok.is_special(i) else tok.token_bytes(i) for i in range(tok.vocab_size)]
        return xgr.TokenizerInfo(vocab, xgr.VocabType.RAW, vocab_size=self.vocab_size,
                                 stop_token_ids=[tok.tool_call_end_id])


class RepetitionGuard:
    """Spots a token stream that has become one unit repeated: feed(token) -> the unit's length once the last
    `window` tokens (and at least `repeats` units) are periodic with a period of at most `max_period`, else None.
    O(max_period) a token."""

    def __init__(self, window: int = RUNAWAY_WINDOW, max_period: int = RUNAWAY_PERIOD, repeats: int = RUNAWAY_REPEATS):
        assert 1 <= max_period < window
        self.window, self.max_period = window, max_period
        self._needed = [max(window, repeats * p) for p in range(max_period + 1)]
        self.tokens: list[int] = []
        self._runs = [0] * (max_period + 1)  # _runs[p]: how many latest tokens equal the token p before them

    def feed(self, token: int) -> int | None:
        self.tokens.append(token)
        n = len(self.tokens)
        found = None
        for p in range(1, self.max_period + 1):
            if n > p and token == self.tokens[n - 1 - p]:
                self._runs[p] += 1
                if found is None and self._runs[p] + p >= self._needed[p]:
                    found = p
            else:
                self._runs[p] = 0
        return found


class ToolCallConstraint:
    """Logits processor for runtime.generate: `process(logits)` masks, `accept(token)` advances the state.

    Calling accept(<tool_call>) before generating starts the reply inside a call (tests use this).
    """

    def __init__(self, grammars: ToolGrammars, compiled: Future, *, required: bool = False):
        tok = grammars.tokenizer
        self._grammars, self._compiled, self._tok = grammars, compiled, tok
        self.start_id, self.end_id = tok.tool_call_start_id, tok.tool_call_end_id
        self.state = REQUIRED if required else START
        self.calls = 0  # calls closed under the mask (tagged and bare)
        self.masked_steps = 0
        self.mask_seconds = 0.0  # time in mask fill/apply, grammar advance and waiting for the compile
        self.error: str | None = None  # why decoding ran unconstrained, if it did
        self.runaway: str | None = None  # set when the open call's text became a loop: stop generating
        self.runaway_name = ""  # ... and the tool that call names, as far as it got
        self._guard: RepetitionGuard | None = None
        self._xgr = None  # the xgrammar module, once a call opens
        self._matcher = None
        self._bitmask = None
        self._head = b""  # the reply's bytes while in START
        newline = tok.encode("\n")
        self._newline_id = newline[0] if len(newline) == 1 else None
        after = [self.start_id, *sorted(tok.stop_ids)]
        self._after_call = torch.tensor(after + ([self._newline_id] if self._newline_id is not None else []))
        self._after_call_nl = torch.tensor(after)
        self._opener = torch.tensor([self.start_id])

    @property
    def in_text(self) -> bool:
        """The reply is plain text (or could still become a bare call): not inside a call."""
        return self.state in (START, TEXT)

    def process(self, logits: torch.Tensor) -> torch.Tensor:
        """(vocab,) logits of the next token -> logits with disallowed tokens at -inf."""
        if self.state in (START, TEXT):
            return logits
        t0 = time.perf_counter()
        if self.state == REQUIRED:
            masked = torch.full_like(logits, float("-inf"))
            masked[self._opener] = logits[self._opener]
            logits = masked
        elif self.state in (CALL, BARE):
            logits = logits.float().contiguous()
            self._matcher.fill_next_token_bitmask(self._bitmask)
            self._xgr.apply_token_bitmask_inplace(logits, self._bitmask, vocab_size=self._grammars.vocab_size)
        else:
            allowed = self._after_call if self.state == AFTER_CALL else self._after_call_nl
            masked = torch.full_like(logits, float("-inf"))
            masked[allowed] = logits[allowed]
            logits = masked
        self.masked_steps += 1
        self.mask_seconds += time.perf_counter() - t0
        return logits

    def accept(self, token: int) -> None:
        t0 = time.perf_counter()
        if self.state in (CALL, BARE):
            self._advance(token)
        elif token == self.start_id:
            self._open(CALL)
        elif self.state == AFTER_CALL and token == self._newline_id:
            self.state = AFTER_CALL_NL
        elif self.state in (START, REQUIRED) and not self._tok.is_special(token):  # REQUIRED: a caller's token
            self._watch_start(token)
        else:
            self.state = TEXT
        self.mask_seconds += time.perf_counter() - t0

    # --- internals ---------------------------------------------------------------------------

    def _advance(self, token: int) -> None:
        period = self._guard.feed(token)
        if period is not None and self.runaway is None:
            call = self._tok.decode(self._guard.tokens)  # from after <tool_call> (tagged) or `{"name"` (bare)
            name = regex.search(r':\s*"([^"]*)"', call)  # the first key's value: the name
            self.runaway_name = name.group(1) if name else ""
            unit = self._tok.decode(self._guard.tokens[-period:])
            shown = repr(unit if len(unit) <= 40 else unit[:40] + "...")
            self.runaway = (f"the call repeated the same text ({shown}) {self._guard.window // period} times in a "
                            f"row, so it was stopped; write each part once")
        if not self._matcher.accept_token(token):  # only when the token was not sampled from masked logits
            self._give_up(f"token {token} does not continue the tool call")
        elif self._matcher.is_terminated():  # </tool_call> (tagged) or end of turn (bare) accepted
            self.calls += 1
            self.state = AFTER_CALL if self.state == CALL else TEXT

    def _watch_start(self, token: int) -> None:
        """START: commit to a bare call once the reply reaches `{"name"`; leave START once it cannot."""
        self._head += self._tok.token_bytes(token)
        text = self._head.decode("utf-8", errors="replace")
        opened = _BARE_OPEN.match(text)
        if opened is None:
            if not _BARE_OPEN.fullmatch(text, partial=True):
                self.state = TEXT
            return
        fenced = opened.group(1) is not None
        body = text[opened.end(1):] if fenced else text.lstrip()  # from the "{" on
        if self._open(BARE, fenced=fenced) and not self._matcher.accept_string(body):
            self._give_up("the reply's opening does not fit the tool-call grammar")

    def _open(self, state: str, fenced: bool = False) -> bool:
        try:
            compiled = self._compiled.result()  # usually long done: compiled while the prompt prefilled
            grammar = compiled.tagged if state == CALL else compiled.bare.result()[1 if fenced else 0]
        except Exception as e:
            self._give_up(f"tool-call grammar unavailable ({type(e).__name__}: {e})")
            return False
        import xgrammar as xgr  # imported by the compile already

        self._xgr = xgr
        if self._bitmask is None:
            self._bitmask = xgr.allocate_token_bitmask(1, self._grammars.vocab_size)
        stops = {} if state == CALL else {"override_stop_tokens": sorted(self._tok.stop_ids)}
        self._matcher = xgr.GrammarMatcher(grammar, **stops)
        self.state = state
        self._guard = RepetitionGuard()
        return True

    def _give_up(self, why: str) -> None:
        log.warning("constrained decoding off for this reply: %s", why)
        self.error, self.state, self._matcher = why, TEXT, None


class NoToolCalls:
    """Logits processor for a reply that must be text (Request.tool_choice "none"): `<tool_call>` is masked
    throughout, and until the reply's first non-blank token, so are tokens opening a bare JSON call or a
    code fence (`{`, `[`, a backtick). A small model that keeps repeating a call then writes its answer."""

    def __init__(self, grammars: ToolGrammars):
        self._openers = grammars.call_openers()
        self._start = grammars.tokenizer.tool_call_start_id
        self._tok = grammars.tokenizer
        self.started = False  # a non-blank token was emitted

    def process(self, logits: torch.Tensor) -> torch.Tensor:
        if self._start is not None:
            logits[self._start] = float("-inf")
        if not self.started:
            logits[self._openers] = float("-inf")
        return logits

    def accept(self, token: int) -> None:
        if not self.started and not self._tok.is_special(token) and self._tok.token_bytes(token).strip():
            self.started = True


def _call_openers(tokenizer: Tokenizer) -> torch.Tensor:
    ids = [i for i in range(tokenizer.vocab_size)
           if not tokenizer.is_special(i) and tokenizer.token_bytes(i).lstrip()[:1] in (b"{", b"[", b"`")]
    return torch.tensor(ids, dtype=torch.long)
