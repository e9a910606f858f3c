"""Our runtime vs llama.cpp on the same GGUF, same token ids, same threads, in one run; prints one table.

    python bench/runtime.py              # full run (~10 min on 2 cores)
    python bench/runtime.py --quick      # smoke run: short prompts, few repetitions
    python bench/runtime.py --no-peer    # ours only

Figures (the peer is llama_cpp.Llama, n_threads=2, n_batch=512, when importable):
  load          ours: first load (GGUF -> converted cache in a fresh temp dir) and second load (from that
                cache, same process, so the page cache is warm); llama.cpp: its load.
  prefill       a fresh session evaluates the first N tokens of real source text (Python stdlib), time to
                the first sampled token; then the session is extended to 2N (prefix reused, N more prefilled).
                Both run in pieces of 512 tokens, ours and the peer alternating, so a shared machine's load
                falls on both alike; pieces are whole batches for both, so the work equals one long call.
  TTFT          the session holds 2N tokens; append A new ones and time the first token (ours: KV cache
                prefix reuse in runtime.generate; llama.cpp: its own prefix reuse in Llama.generate).
  decode        greedy, 64 tokens after a 512-token context; tokens/s from the first token to the last;
                one warm-up, then the median of several repetitions, ours and the peer alternating.
  verify        ours only: one forward of k=8 tokens vs one decode step, both at 512 context.
Ratios are ours/llama.cpp. "others' CPU" is the share of the cores that other processes used while a
figure was measured (from /proc/stat): with other work on the cores, both engines' thread barriers
stall and figures drop several-fold, so quote only rows measured near 0%.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import importlib
import inspect
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

# Run as a script, this file's folder is first on sys.path and its name would shadow the runtime package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from runtime.api import Sampling  # noqa: E402
from runtime.engine import LocalEngine  # noqa: E402
from runtime.generate import generate  # noqa: E402
from runtime.kv_cache import KVCache  # noqa: E402
from runtime.models import ModelError, resolve_model  # noqa: E402
from runtime.options import RuntimeOptions  # noqa: E402


@dataclass
class Settings:
    prefill: int = 2048  # prompt tokens of the prefill figure; the TTFT session holds 2x this
    piece: int = 512  # prefill runs in pieces of this many tokens, ours and the peer alternating
    append: int = 200  # new tokens appended to the session for TTFT
    decode_context: int = 512
    decode_tokens: int = 64
    prefill_reps: int = 3  # fresh sessions prefilling the first N tokens
    decode_reps: int = 5  # after one warm-up
    ttft_reps: int = 5
    verify_k: int = 8
    verify_reps: int = 15
    convert: bool = True  # time a first load that converts the GGUF into a fresh cache

    @classmethod
    def quick(cls) -> "Settings":
        return cls(prefill=256, piece=128, append=64, decode_context=128, decode_tokens=16, prefill_reps=1, decode_reps=2,
                   ttft_reps=1,
                   verify_reps=3, convert=False)

    @property
    def session(self) -> int:
        return 2 * self.prefill


@dataclass
class Row:
    figure: str
    ours: float | None
    peer: float | None = None
    unit: str = ""
    better: str = "higher"  # "higher" | "lower": which ratio is better
    target: str = ""
    others: float | None = None  # share of the cores other processes used while this figure was measured


class CpuShare:
    """CPU time other processes took since the last mark, as a share of all cores (0: we had the machine)."""

    def __init__(self):
        self.mark()

    def mark(self) -> None:
        self._wall, self._busy, self._ours = time.perf_counter(), _busy_seconds(), _our_cpu_seconds()

    def take(self) -> float | None:
        """The share since the last mark; marks again."""
        wall, busy, ours = time.perf_counter() - self._wall, _busy_seconds(), _our_cpu_seconds()
        share = None
        if busy is not None and self._busy is not None and wall > 0:
            share = max(0.0, ((busy - self._busy) - (ours - self._ours)) / ((os.cpu_count() or 1) * wall))
        self.mark()
        return share


def _busy_seconds() -> float | None:
    """Non-idle CPU seconds of the whole machine (Linux /proc/stat; None elsewhere)."""
    try:
        values = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")  # minus idle and iowait


def _our_cpu_seconds() -> float:
    t = os.times()  # this process, all threads (llama.cpp's run in-process too)
    return t.user + t.system


# --- workload ----------------------------------------------------------------------------------

SOURCE_MODULES = ("inspect", "argparse", "pathlib", "typing", "json.decoder")

def source_tokens(tokenizer, n: int) -> list[int]:
    """The first n tokens of real Python source: stdlib modules concatenated until there are enough."""
    ids: list[int] = []
    for name in SOURCE_MODULES:
        ids += tokenizer.encode(Path(inspect.getfile(importlib.import_module(name))).read_text(encoding="utf-8"))
        if len(ids) >= n:
            return ids[:n]
    raise SystemExit(f"error: the stdlib sources hold only {len(ids)} tokens, {n} needed")


# --- ours --------------------------------------------------------------------------------------

class Ours:
    def __init__(self, engine: LocalEngine):
        self.engine, self.model = engine, engine.model
        self.cache = KVCache(self.model.config, model_id=engine.model_id)

    def first_token(self, prompt: list[int], fresh: bool = False) -> tuple[float, int]:
        """Seconds to the first greedy token after `prompt` (prefix reuse from the cache) and the new tokens fed."""
        if fresh:
            self.cache = KVCache(self.model.config, model_id=self.engine.model_id)
        gen = generate(self.model, self.cache, prompt, Sampling(max_tokens=1))
        t0 = time.perf_counter()
        next(iter(gen))
        return time.perf_counter() - t0, gen.usage.prefilled_tokens

    def truncate(self, n: int) -> None:
        self.cache.truncate(n)

    def decode(self, context: list[int], n: int) -> tuple[float, list[int]]:
        """Greedy tokens/s of n tokens after `context` (a cached prefix; generate re-feeds its last token) and the tokens."""
        gen = generate(self.model, self.cache, context, Sampling(max_tokens=n), stop_ids=())
        tokens = list(gen)
        return gen.usage.decode_tps, tokens

    def step_seconds(self, context: list[int], ks: tuple[int, ...], reps: int) -> list[float]:
        """Median seconds of one forward of k new tokens at len(context), for each k, the ks alternating."""
        base = len(context)
        self.cache.truncate(base)
        times: list[list[float]] = [[] for _ in ks]
        for _ in range(reps + 1):  # the first round is a warm-up
            for k, out in zip(ks, times):
                t0 = time.perf_counter()
                self.model.forward(torch.tensor(context[:k]), torch.arange(base, base + k), self.cache)  # ids: any
                out.append(time.perf_counter() - t0)
                self.cache.truncate(base)
        return [statistics.median(t[1:]) for t in times]


# --- the peer: llama.cpp -----------------------------------------------------------------------

class Peer:
    def __init__(self, path: Path, threads: int, n_ctx: int):
        from llama_cpp import Llama

        t0 = time.perf_counter()
        self.llm = Llama(model_path=str(path), n_threads=threads, n_threads_batch=threads, n_batch=512,
                         n_ctx=n_ctx, logits_all=False, verbose=False)
        self.load_seconds = time.perf_counter() - t0

    def first_token(self, prompt: list[int], fresh: bool = False) -> float:
        """Llama.generate reuses the longest common prefix of its context, then evaluates the rest."""
        if fresh:
            self.llm.reset()
        t0 = time.perf_counter()
        next(iter(self.llm.generate(prompt, temp=0.0)))
        return time.perf_counter() - t0

    def truncate_to(self, prompt: list[int]) -> None:
        """Bring the context back to `prompt` (its prefix reuse replays the last token: one decode step)."""
        next(iter(self.llm.generate(prompt, temp=0.0)))

    def decode(self, context: list[int], n: int) -> tuple[float, list[int]]:
        tokens, t_first = [], 0.0
        for token in self.llm.generate(context, temp=0.0):
            tokens.append(token)
            if len(tokens) == 1:
                t_first = time.perf_counter()
            if len(tokens) == n:
                break
        return (n - 1) / (time.perf_counter() - t_first), tokens


# --- the run -----------------------------------------------------------------------------------

def measure(s: Settings, spec: str | None, options: RuntimeOptions, threads: int,
            use_peer: bool) -> tuple[list[Row], list[str]]:
    notes: list[str] = []
    path = resolve_model(spec, options.cache_dir)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp:
        cache_dir = Path(tmp) if s.convert else None
        first, first_share, meter = None, None, CpuShare()
        if s.convert:
            t0 = time.perf_counter()
            engine = LocalEngine.from_spec(str(path), options, cache_dir=cache_dir, threads=threads)
            first = time.perf_counter() - t0
            notes.append(f"ours first load: {engine.load_seconds:.1f} s of {first:.1f} s converting the GGUF")
            assert not engine.loaded_from_cache, "a fresh cache dir must convert"
            del engine
            gc.collect()
            first_share = meter.take()
        t0 = time.perf_counter()
        engine = LocalEngine.from_spec(str(path), options, cache_dir=cache_dir, threads=threads)
        second, second_total = engine.load_seconds, time.perf_counter() - t0
        if not engine.loaded_from_cache:
            notes.append("the 'second' load converted the GGUF: no converted cache existed")
        ours = Ours(engine)
        peer = Peer(path, threads, s.session + s.append + s.decode_tokens + 64) if use_peer else None
        rows.append(Row("load, first (convert GGUF into the cache)", first, None, "s", "lower", others=first_share))
        rows.append(Row("load, second (converted cache; llama.cpp: its load)", second_total,
                        peer.load_seconds if peer else None, "s", "lower", others=meter.take()))
        notes.append(f"ours second load: {second:.2f} s mapping the converted cache, the rest of {second_total:.2f} s "
                     "building the tokenizer, template and model")
        tokens = source_tokens(engine.tokenizer, s.session + s.append)
        rows += run_workload(s, ours, peer, tokens, notes, meter)
        return rows, notes


def run_workload(s: Settings, ours: Ours, peer: Peer | None, tokens: list[int], notes: list[str],
                 meter: CpuShare) -> list[Row]:
    rows = []
    n, session, full = s.prefill, tokens[: s.session], tokens[: s.session + s.append]
    ours.first_token(tokens[:32], fresh=True)  # warm-up: first touch of the mapped weights, lazy inits
    if peer:
        peer.first_token(tokens[:32], fresh=True)
    meter.mark()
    # Prefill: a fresh session evaluates n tokens, then grows to 2n. Each engine extends its own session
    # in pieces, ours and the peer alternating, so both see the same load on a shared machine; the pieces
    # are whole batches for both (ours prefills in chunks of 256, llama.cpp in batches of 512).
    ta, tb = [], []
    for _ in range(s.prefill_reps):  # the last repetition's session is the one extended below
        a, b = prefill_pieces(s, ours, peer, tokens, 0, n)
        ta.append(a)
        tb.append(b)
    rows.append(Row(f"prefill, {n}-token prompt (pieces of {s.piece}, median of {s.prefill_reps})",
                    n / statistics.median(ta), n / statistics.median(tb) if peer else None, "tok/s", target=">= 1.5x",
                    others=meter.take()))
    a, b = prefill_pieces(s, ours, peer, tokens, n, s.session)
    rows.append(Row(f"prefill, context {n} -> {s.session} (pieces of {s.piece}, 1 run)", (s.session - n) / a,
                    (s.session - n) / b if peer else None, "tok/s", others=meter.take()))
    # TTFT: the session holds 2n tokens; append s.append new ones.
    ta, tb = [], []
    for _ in range(s.ttft_reps):
        ours.truncate(s.session)
        t, fed = ours.first_token(full)
        assert fed == s.append, (fed, s.append)  # exactly the new tokens were prefilled
        ta.append(t)
        if peer:
            peer.truncate_to(session)
            tb.append(peer.first_token(full))
    rows.append(Row(f"TTFT, +{s.append} tokens on a {s.session}-token session (median of {s.ttft_reps})",
                    statistics.median(ta), statistics.median(tb) if tb else None, "s", "lower", others=meter.take()))
    # Decode at the decode context, alternating ours and the peer; the first round is a warm-up.
    context = tokens[: s.decode_context]
    da, db, same = [], [], None
    for _ in range(s.decode_reps + 1):
        tps, ours_tokens = ours.decode(context, s.decode_tokens)
        da.append(tps)
        if peer:
            tps, peer_tokens = peer.decode(context, s.decode_tokens)
            db.append(tps)
            same = next((i for i, (x, y) in enumerate(zip(ours_tokens, peer_tokens)) if x != y), None)
    rows.append(Row(f"decode, {s.decode_tokens} tokens at {s.decode_context} context (median of {s.decode_reps})",
                    statistics.median(da[1:]), statistics.median(db[1:]) if db else None, "tok/s", target=">= 1.0x",
                    others=meter.take()))
    if peer:
        notes.append("greedy decode tokens identical to llama.cpp" if same is None else
                     f"greedy decode tokens differ from llama.cpp from token {same} on (see docs/BENCHMARKS.md)")
    # Verify: one forward of k tokens vs one decode step, both at the decode context, alternating.
    step, verify = ours.step_seconds(context, (1, s.verify_k), s.verify_reps)
    share = meter.take()
    rows.append(Row(f"decode step (forward of 1 token at {s.decode_context})", step * 1000, None, "ms", "lower", others=share))
    rows.append(Row(f"verify (forward of k={s.verify_k} tokens at {s.decode_context})", verify * 1000, None, "ms", "lower",
                    others=share))
    rows.append(Row(f"verify k={s.verify_k} / decode step", verify / step, None, "x", "lower", target="<= 2x", others=share))
    return rows


def prefill_pieces(s: Settings, ours: Ours, peer: Peer | None, tokens: list[int], lo: int, hi: int) -> tuple[float, float]:
    """Seconds for ours and the peer to grow their sessions from lo to hi tokens (lo 0: fresh), piece by piece."""
    ta, tb = 0.0, 0.0
    for a in range(lo, hi, s.piece):
        end = min(a + s.piece, hi)
        t, fed = ours.first_token(tokens[:end], fresh=a == 0)
        assert fed == end - a, (fed, end - a)  # only the piece was prefilled
        ta += t
        tb += peer.first_token(tokens[:end], fresh=a == 0) if peer else 0.0
    return ta, tb


# --- output ------------------------------------------------------------------------------------

def fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def table(rows: list[Row], peer_name: str) -> str:
    lines = [f"| figure | unit | ours | {peer_name} | ours/{peer_name} | better | target | others' CPU |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r.ours / r.peer:.2f}x" if r.ours is not None and r.peer else "-"
        others = "-" if r.others is None else f"{100 * r.others:.0f}%"
        lines.append(f"| {r.figure} | {r.unit} | {fmt(r.ours)} | {fmt(r.peer)} | {ratio} | {r.better} | {r.target} "
                     f"| {others} |")
    return "\n".join(lines)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()} cores ({cpu}), load average {load:.2f} at start"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short prompts, few repetitions (a smoke run)")
    ap.add_argument("--no-peer", action="store_true", help="measure our runtime only")
    ap.add_argument("--model", default=None, help="registered model name or GGUF path (default: the bundled default, the 1.5B)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    s = Settings.quick() if args.quick else Settings()
    use_peer, why = not args.no_peer, "--no-peer"
    if use_peer:
        try:
            import llama_cpp
        except ImportError as e:
            use_peer, why = False, f"llama_cpp is not importable ({e})"
    torch.set_num_threads(args.threads)
    print(f"# bench/runtime.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"date: {datetime.datetime.now().isoformat(timespec='seconds')}; machine: {machine()}")
    print(f"torch {torch.__version__}; llama_cpp {llama_cpp.__version__ if use_peer else '-'}; threads {args.threads}")
    if not use_peer:
        print(f"ours only: {why}")
    t0 = time.perf_counter()
    try:
        rows, notes = measure(s, args.model, RuntimeOptions.from_env(os.environ), args.threads, use_peer)
    except (ModelError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print()
    print(table(rows, "llama.cpp"))
    print()
    for note in notes:
        print(f"- {note}")
    print(f"- wall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
