"""LocalEngine: the in-process runtime behind the Engine seam (runtime.api).

One model, many sessions; each session keeps its KV cache and the tokens of its conversation so
far (PromptState), so a turn prefills only the messages added since the last call. Generation runs
in a worker thread that feeds a queue, so prefill progress streams out while it happens.

Warm starts (runtime.prefix_store): a session whose cache is empty at its first call starts from the
stored prompt KV sharing the longest token prefix with its prompt (written by an earlier session, in
this process or another), so only the rest is prefilled; Usage.reused_tokens counts the tokens served
from it and Usage.ttft_s includes the load. After such a session's first prefill its prompt's KV is
stored (in a background thread) unless an entry already covers nearly all of it.

Per step, Request.allowed_tools, tool_overrides and tool_choice narrow the call grammar (runtime.constrain)
while the prompt keeps every tool; without a grammar, a call to a tool not allowed comes back as an error.
"""
from __future__ import annotations

import logging
import os
import queue
import threading
import time
import uuid
from dataclasses import astuple, dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

import torch

from runtime import cpu_kernels, kernel_packs
from runtime.api import Done, Event, Model, Progress, Request, TextDelta, ToolCall, Usage
from runtime.branches import generate_branches
from runtime.candidates import Candidate, SampleMemo, StopStrings
from runtime.chat_template import ChatTemplate
from runtime.constrain import NoToolCalls, ToolCallConstraint, ToolGrammars, grammar_tools
from runtime.speculate import PromptLookup, corpus_texts
from runtime.text_loop import TextLoop
from runtime.generate import generate
from runtime.gguf_loader import load_model_files
from runtime.kv_cache import KVCache
from runtime.model import Qwen2Model
from runtime.models import DEFAULT_MODEL, resolve_model
from runtime.options import RuntimeOptions
from runtime.prefix_store import MIN_REUSE_TOKENS, PrefixStore, store_fingerprint
from runtime.prompt import PromptBuilder, PromptState
from runtime.tokenizer import Tokenizer
from runtime.toolcalls import ParsedCall, ToolCallParser
from runtime.weights import FORMAT_ID, prepare_tensor, reset_kernel_state

log = logging.getLogger(__name__)
_END = object()  # queue sentinel: the worker finished
MAX_CORPUS_RESULTS = 16  # the latest tool results offered to speculation in their copied forms


class _Either:
    """Set when any of its events is set (Generation calls only is_set on its cancel event)."""

    def __init__(self, *events: threading.Event | None):
        self.events = [e for e in events if e is not None]

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


class CpuModel(Qwen2Model):
    """Qwen2Model with the Model protocol's cache methods (they belong in runtime/model.py; moved there later)."""

    def new_cache(self, *, model_id: str = "") -> KVCache:
        return KVCache(self.config, model_id=model_id)

    def load_cache(self, path: Path, *, model_id: str = "") -> KVCache:
        return KVCache.load(path, self.config, model_id=model_id)


@dataclass
class _Session:
    cache: KVCache
    state: PromptState | None = None  # messages of the last prompt + tokens through the reply's end glue
    started: bool = False  # has had a call in this process (only a session's first call uses the prefix store)
    corpus: dict = field(default_factory=dict)  # tool-result text -> its token forms, for speculation drafts


class LocalEngine:
    """Engine over an in-process model; `stream` is safe to call from several threads (one runs at a time)."""

    def __init__(self, model: Model, tokenizer: Tokenizer, template: ChatTemplate, *, name: str,
                 model_id: str = "", max_context: int | None = None, load_seconds: float = 0.0,
                 loaded_from_cache: bool = False, prefix_store: PrefixStore | None = None,
                 constrained_tools: bool = True):
        self.model, self.tokenizer, self.name, self.model_id = model, tokenizer, name, model_id
        self.prefix_store = prefix_store if prefix_store is not None and prefix_store.enabled else None
        self.constrained_tools = constrained_tools  # False: never constrain, whatever a Request asks
        self.builder = PromptBuilder(template, tokenizer)
        self.grammars = ToolGrammars(tokenizer, model.config.vocab_size)  # compiled tool-call grammars
        self._context = min(max_context or model.config.context_length, model.config.context_length)
        self.load_seconds, self.loaded_from_cache = load_seconds, loaded_from_cache
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()  # one forward pass at a time: the weights and the CPU cores are shared
        self._writes: list[threading.Thread] = []  # prefix-store writes in flight
        self._sampled = SampleMemo()  # seeded sampling repeats itself: a repeated request is not decoded again

    @classmethod
    def from_spec(cls, spec: str | None = None, options: RuntimeOptions | None = None, *,
                  cache_dir: Path | None = None, threads: int | None = None, max_context: int | None = None,
                  progress: Callable[[Progress], None] | None = None, prefix_cache_bytes: int | None = None,
                  prefix_dir: Path | None = None, constrained_tools: bool = True) -> "LocalEngine":
        """Resolve a registry name or GGUF path, load (converting on first use) and build the engine.

        `options` says how to run (device, threads, cache dir, CPU kernel, prefix KV budget); `threads` and
        `prefix_cache_bytes` override its fields, `cache_dir` moves this engine's models, converted weights and
        prefix KV (the kernel build stays in options.cache_dir). The prefix store lives in `prefix_dir` (default
        <cache_dir>/prefix-kv); a budget of 0 turns warm starts off."""
        if options is None:
            # Transitional, for the agent's CLI until it passes options itself (then None means the defaults).
            options = RuntimeOptions.from_env(os.environ)
        options = replace(options, **{k: v for k, v in (("threads", threads), ("prefix_cache_bytes", prefix_cache_bytes))
                                      if v is not None})
        cache_dir = Path(cache_dir) if cache_dir is not None else options.cache_dir
        torch.set_num_threads(options.torch_threads)
        if cpu_kernels.configure(enabled=options.cpu_kernel, max_m=options.cpu_kernel_max_m, cache_dir=options.cache_dir):
            reset_kernel_state()  # drop plans and the piece size cached from the previous configuration
        if options.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device 'cuda' was asked for, but torch sees no CUDA device")
        path = resolve_model(spec, cache_dir, progress)
        if options.device != "cpu" and torch.cuda.is_available():
            from runtime import cuda  # bf16 weights on the GPU, Triton kernels, CUDA graphs
            fmt = cuda.FORMAT_ID
            loaded = load_model_files(path, cuda.prepare_tensor, fmt, cache_dir, progress)
        else:
            fmt = FORMAT_ID
            loaded = load_model_files(path, prepare_tensor, fmt, cache_dir, progress)
        tokenizer = Tokenizer.from_gguf_data(loaded.tokenizer_data)
        data = loaded.tokenizer_data
        specials = {k: data.tokens[i] for k, i in (("bos_token", data.bos_id), ("eos_token", data.eos_id)) if i is not None}
        template = ChatTemplate(loaded.chat_template, specials)
        budget = options.prefix_cache_bytes
        if fmt == FORMAT_ID:
            model = CpuModel.from_tensors(loaded.config, loaded.tensors)
            kernel_packs.attach(model, loaded.format_dir, progress)  # kernel layouts from disk, not rebuilt
        else:
            model = cuda.build_cuda_model(loaded.config, loaded.tensors)
        name = spec if spec and not spec.endswith(".gguf") else (Path(spec).stem if spec else DEFAULT_MODEL)
        model_id = f"{path.name}:{fmt}"
        root = Path(prefix_dir) if prefix_dir else cache_dir / "prefix-kv"
        store = PrefixStore(root, model_id, loaded.config,
                            fingerprint=store_fingerprint(model), budget_bytes=budget,
                            load_cache=model.load_cache) if budget > 0 else None
        return cls(model, tokenizer, template, name=name, model_id=model_id, max_context=max_context,
                   load_seconds=loaded.load_seconds, loaded_from_cache=loaded.from_cache, prefix_store=store,
                   constrained_tools=constrained_tools)

    # --- Engine protocol -------------------------------------------------------------------------

    @property
    def context_window(self) -> int:
        return self._context

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text))

    def stream(self, request: Request, *, cancel: threading.Event | None = None) -> Iterator[Event]:
        abandoned = threading.Event()  # set when the consumer stops reading; the caller's event is left alone
        stop = _Either(cancel, abandoned)
        events: queue.Queue = queue.Queue()
        worker = threading.Thread(target=self._generate, args=(request, stop, events), daemon=True,
                                  name=f"generate-{request.session_id}")
        worker.start()
        try:
            while (event := events.get()) is not _END:
                yield event
        finally:
            if worker.is_alive():  # the consumer went away: stop generating
                abandoned.set()
            worker.join()

    def sample(self, request: Request, n: int, *, cancel: threading.Event | None = None,
               greedy: int = 0) -> tuple[list[Candidate], Usage]:
        """n text replies to `request` decoded together, branch i seeded request.sampling.seed + i (greedy: n copies
        of one reply); the first `greedy` of them decoded greedily whatever the temperature. Tool calls are not parsed and nothing is appended to the session: its cache keeps the
        prompt (the next request reuses it), so the caller sends the chosen reply back as an ordinary message."""
        with self._lock:
            session = self._session(request.session_id)
            built = self.builder.build(request.messages, request.tools, session.state)
            prompt = built.tokens + (self.tokenizer.encode(request.reply_prefix) if request.reply_prefix else [])
            room = self._context - len(prompt)
            if room <= 0:
                return [], Usage(prompt_tokens=len(prompt))
            key = (tuple(prompt), n, astuple(request.sampling), greedy, tuple(request.stop or ()))
            if (known := self._sampled.get(key)) is not None:
                return known, Usage(prompt_tokens=len(prompt), reused_tokens=len(prompt))
            end = self.tokenizer.im_end_id if self.tokenizer.im_end_id is not None else self.tokenizer.eos_id
            processors = [StopStrings(request.stop, self.tokenizer.decoder(), end) if request.stop else None
                          for _ in range(n)]
            loops = [TextLoop(self.tokenizer, prompt) for _ in range(n)]
            seed = request.sampling.seed or 0
            t0 = time.monotonic()
            warm = self._warm_start(session, prompt)  # a session that starts with candidates starts warm too
            reused = session.cache.common_prefix_len(prompt)
            branches = generate_branches(self.model, session.cache, prompt, n, request.sampling,
                                         min(request.sampling.max_tokens, room), self.tokenizer.stop_ids,
                                         seeds=[seed + i for i in range(n)], logits_processors=processors,
                                         cancel=cancel, greedy=greedy, loops=loops)
            session.state = None  # the cache holds the prompt only: the next build renders the messages afresh
            if warm is not None:
                self._store_prefix(session.cache, prompt, warm[0])  # skipped when a cancel cut the prefill short
        out = []
        for b in branches:
            shown = [t for t in b.tokens if t not in self.tokenizer.stop_ids]
            out.append(Candidate(self.tokenizer.decode(shown), len(b.tokens), b.mean_logprob, b.finish_reason or "stop"))
        self._sampled.put(key, out)
        usage = Usage(prompt_tokens=len(prompt), reused_tokens=min(reused, len(prompt) - 1),
                      prefilled_tokens=len(prompt) - min(reused, len(prompt) - 1),
                      generated_tokens=sum(c.tokens for c in out))
        usage.decode_tps = usage.generated_tokens / max(1e-9, time.monotonic() - t0)
        return out, usage

    # --- sessions --------------------------------------------------------------------------------

    def session_tokens(self, session_id: str) -> list[int]:
        """The session's conversation tokens so far (prompt, reply, end-of-turn glue)."""
        s = self._sessions.get(session_id)
        return list(s.state.tokens) if s and s.state else []

    def fork_session(self, parent_id: str, child_id: str, prefix_tokens: int | None = None) -> int:
        """Start `child_id` from a copy of the parent's cached prefix; returns how many tokens it holds."""
        parent = self._sessions.get(parent_id)
        if parent is None:
            return 0
        with self._lock:
            self._sessions[child_id] = _Session(parent.cache.fork(prefix_tokens))
        return self._sessions[child_id].cache.length

    def save_session(self, session_id: str, path: Path) -> bool:
        """Write the session's KV cache to `path` (atomic); False when there is none."""
        s = self._sessions.get(session_id)
        if s is None or s.cache.length == 0:
            return False
        with self._lock:
            s.cache.save(path)
        return True

    def load_session(self, session_id: str, path: Path) -> int:
        """Load a saved KV cache for `session_id`; returns tokens loaded, 0 when the file is unusable."""
        try:
            cache = self.model.load_cache(path, model_id=self.model_id)
        except Exception:  # corrupt, truncated or from another model: ignore and re-prefill
            return 0
        self._sessions[session_id] = _Session(cache)
        return cache.length

    def drop_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def wait_for_prefix_store(self, timeout: float | None = None) -> None:
        """Block until the prefix-store writes started so far are on disk (tests, benchmarks)."""
        for t in list(self._writes):
            t.join(timeout)
        self._writes = [t for t in self._writes if t.is_alive()]

    def _session(self, session_id: str) -> _Session:
        if session_id not in self._sessions:
            self._sessions[session_id] = _Session(self.model.new_cache(model_id=self.model_id))
        return self._sessions[session_id]

    # --- generation (worker thread) --------------------------------------------------------------

    def _generate(self, request: Request, cancel: "_Either", out: queue.Queue) -> None:
        try:
            with self._lock:
                self._generate_locked(request, cancel, out)
        except Exception as e:  # a bug or out-of-memory must end the stream with a Done, not hang the caller
            out.put(Done(Usage(), "error", f"{type(e).__name__}: {e}"))
        finally:
            out.put(_END)

    def _generate_locked(self, request: Request, cancel: "_Either", out: queue.Queue) -> None:
        session = self._session(request.session_id)
        built = self.builder.build(request.messages, request.tools, session.state)
        prompt = built.tokens + (self.tokenizer.encode(request.reply_prefix) if request.reply_prefix else [])
        room = self._context - len(prompt)
        if room <= 0:
            out.put(Done(Usage(prompt_tokens=len(prompt)), "context_full",
                         f"the prompt has {len(prompt)} tokens; the context window is {self._context}"))
            return
        warm = self._warm_start(session, prompt)
        choice = "none" if request.allowed_tools == [] else request.tool_choice
        constrain = request.constrained_tools and self.constrained_tools and request.tools and self.grammars.usable
        constraint = None
        if constrain and choice != "none":  # the grammar compiles while the prompt prefills
            tools = grammar_tools(request.tools, request.allowed_tools, request.tool_overrides)
            constraint = self.grammars.constraint(tools, required=choice == "required")
        processor: ToolCallConstraint | NoToolCalls | None = NoToolCalls(self.grammars) if choice == "none" else constraint
        gen = generate(self.model, session.cache, prompt, request.sampling, stop_ids=self.tokenizer.stop_ids,
                       cancel=cancel, on_progress=out.put, max_tokens=min(request.sampling.max_tokens, room),
                       processor=processor, speculation=request.speculation,
                       drafter=self._drafter(session, request, prompt) if request.speculation else None)
        names = frozenset(t["function"]["name"] for t in request.tools if "function" in t)
        parser, decoder = ToolCallParser(tool_names=names), self.tokenizer.decoder()
        loop = TextLoop(self.tokenizer, prompt)  # a call's own loops are the constraint's
        generated: list[int] = []
        shown, stopped = "", False  # the reply's text so far, for request.stop; whether a stop string ended it
        tokens = iter(gen)
        for token in tokens:
            generated.append(token)
            if token in self.tokenizer.stop_ids:
                continue  # the generator ends itself after a stop token; its text is not shown
            piece = decoder.feed(token)
            for item in parser.feed(piece):
                out.put(self._event(item, request.allowed_tools))
            if request.stop:
                shown += piece
                if any(s in shown for s in request.stop):
                    stopped = True
                    tokens.close()
                    break
            if constraint is not None and constraint.runaway:  # a call looping on one piece of text: stop it here
                tokens.close()
                break
            if (constraint is None or constraint.in_text) and loop.feed(token):
                tokens.close()
                break
        runaway = constraint.runaway if constraint is not None else None
        for item in parser.feed(decoder.flush()) + ([] if runaway else parser.finish()):
            out.put(self._event(item, request.allowed_tools))
        if runaway:  # the unfinished call comes back as an error the model can act on
            out.put(ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=constraint.runaway_name, arguments={},
                             error=runaway, raw=self.tokenizer.decode(generated)))
        # What the conversation now holds, token-exact, for the next call's prefix.
        session.state = PromptState(list(request.messages), list(request.tools),
                                    prompt + generated + self.builder.end_of_turn(generated))
        usage = gen.usage
        if warm is not None:
            covered, load_s = warm
            if usage.generated_tokens:
                usage.ttft_s += load_s  # the disk read is part of the wait for the first token
            self._store_prefix(session.cache, prompt, covered)
        stop = {"stop": "tool_use" if parser.calls else "end_turn"}.get(gen.stop_reason or "", gen.stop_reason or "end_turn")
        if runaway:
            stop = "tool_use"
        elif stopped:
            stop = "end_turn"
        elif loop.reason:
            out.put(Done(usage, "runaway", loop.reason))
            return
        out.put(Done(usage, stop))

    def _warm_start(self, session: _Session, prompt: list[int]) -> tuple[int, float] | None:
        """At a session's first call with an empty cache: start from the stored prefix sharing the most
        tokens with `prompt`. Returns (tokens of the prompt the store covers, seconds spent), or None
        when the store does not apply to this call."""
        first, session.started = not session.started, True
        if self.prefix_store is None or not first or session.state is not None or session.cache.length:
            return None
        t0 = time.perf_counter()
        covered = 0
        match = self.prefix_store.lookup(prompt)
        if match is not None and match.common >= MIN_REUSE_TOKENS:
            cache = self.prefix_store.load(match, keep=min(match.common, len(prompt) - 1))
            if cache is not None:
                session.cache, covered = cache, match.common
        return covered, time.perf_counter() - t0

    def _store_prefix(self, cache: KVCache, prompt: list[int], covered: int) -> None:
        """Write the prompt's KV in the background when it was prefilled whole and no entry covers it."""
        n = len(prompt)
        if (self.prefix_store is None or not self.prefix_store.should_store(n, covered)
                or cache.length < n or cache.tokens[:n] != prompt):
            return
        snapshot = cache.fork(n)  # the session goes on changing its own cache
        # Not a daemon: a process that ends right after its first turn still finishes the write.
        t = threading.Thread(target=self._store_quietly, args=(self.prefix_store, snapshot), name="prefix-store")
        t.start()
        self._writes = [w for w in self._writes if w.is_alive()] + [t]

    @staticmethod
    def _store_quietly(store: PrefixStore, cache: KVCache) -> None:
        try:
            store.store(cache)
        except Exception as e:  # a warm start lost is not worth a traceback
            log.warning("prefix store: write failed: %s: %s", type(e).__name__, e)

    def _drafter(self, session: _Session, request: Request, prompt: list[int]) -> PromptLookup:
        """Prompt lookup over the conversation, plus each tool result as a model would copy it into a call."""
        texts = [m["content"] for m in request.messages if m.get("role") == "tool" and isinstance(m.get("content"), str)]
        corpus = []
        for text in texts[-MAX_CORPUS_RESULTS:]:
            if text not in session.corpus:
                session.corpus[text] = [self.tokenizer.encode(form) for form in corpus_texts(text)]
            corpus.extend(session.corpus[text])
        keep = set(texts[-MAX_CORPUS_RESULTS:])
        session.corpus = {t: forms for t, forms in session.corpus.items() if t in keep}
        return PromptLookup(prompt, corpus)

    @staticmethod
    def _event(item: str | ParsedCall, allowed: list[str] | None) -> Event:
        if isinstance(item, str):
            return TextDelta(item)
        error = item.error
        if error is None and allowed is not None and item.name not in allowed:  # possible only without the grammar
            error = (f"{item.name} cannot be called in this step; call one of: {', '.join(allowed)}" if allowed
                     else f"{item.name} cannot be called in this step; answer in text")
        return ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=item.name, arguments=item.arguments,
                        error=error, raw=item.raw)

