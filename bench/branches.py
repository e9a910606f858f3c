"""N sampled branches decoded together (runtime.branches) vs one branch: time and ratio to N=1; prints one table.

    python bench/branches.py                      # N = 1, 2, 4; 100 tokens each after a 500-token prompt
    python bench/branches.py --prompt 4000        # the same at a longer context

Each figure is one generate_branches call on a cache that already holds the prompt (its prefill, shared by every
branch, is timed once on its own): the first tokens from the prompt's logits, then batched steps until every branch
has its tokens (no stop tokens, so every branch runs the full length; branches share a row only while their tokens
agree, a few tokens at temperature 0.8). N = 1, 2, 4 alternate,
one warm-up round, then the median of --reps rounds. Also: plain `generate` (speculation off) for the same tokens,
the greedy check (N greedy branches against plain greedy decoding: equal up to a near-tie that fp32 rounding flips),
the branches' own K/V, and the two ways to go on with a winner: `keep` (copies its own positions) vs re-feeding its
tokens (a prefill).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib
import inspect
import os
import statistics
import sys
import time
from pathlib import Path

import torch

# Run as a script, this file's folder is first on sys.path and bench/runtime.py would shadow the runtime package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from runtime.api import Sampling  # noqa: E402
from runtime.branches import generate_branches, keep  # noqa: E402
from runtime.generate import generate  # noqa: E402
from runtime.gguf_loader import load_model_files  # noqa: E402
from runtime.kv_cache import KVCache  # noqa: E402
from runtime.model import Qwen2Model  # noqa: E402
from runtime.models import ModelError, resolve_model  # noqa: E402
from runtime.tokenizer import Tokenizer  # noqa: E402
from runtime.weights import FORMAT_ID, prepare_tensor  # noqa: E402

SOURCE_MODULES = ("inspect", "argparse", "pathlib", "typing")
SAMPLING = Sampling(temperature=0.8, top_p=0.95, seed=0)


def source_tokens(tokenizer: Tokenizer, n: int) -> list[int]:
    """The first n tokens of real Python source (stdlib modules concatenated), as bench/runtime.py uses."""
    ids: list[int] = []
    for name in SOURCE_MODULES:
        ids += tokenizer.encode(Path(inspect.getfile(importlib.import_module(name))).read_text(encoding="utf-8"))
        if len(ids) >= n:
            return ids[:n]
    raise SystemExit(f"error: the stdlib sources hold only {len(ids)} tokens, {n} needed")


def others_share(since: tuple[float, float, float]) -> float | None:
    """Share of the cores other processes used since `since` = mark() (Linux /proc/stat; None elsewhere)."""
    wall, busy, ours = mark()
    if busy is None or since[1] is None or wall <= since[0]:
        return None
    return max(0.0, ((busy - since[1]) - (ours - since[2])) / ((os.cpu_count() or 1) * (wall - since[0])))


def mark() -> tuple[float, float | None, float]:
    try:
        values = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        busy = (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        busy = None
    t = os.times()
    return time.perf_counter(), busy, t.user + t.system


def first_difference(a: list[int], b: list[int]) -> int | None:
    return next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), None if len(a) == len(b) else min(len(a), len(b)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="registered model name or GGUF path (default: the bundled default, the 1.5B)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=500, help="prompt tokens")
    ap.add_argument("--tokens", type=int, default=100, help="tokens per branch")
    ap.add_argument("--ns", default="1,2,4", help="branch counts, comma-separated")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    ns = [int(x) for x in args.ns.split(",")]
    torch.set_num_threads(args.threads)
    try:
        path = resolve_model(args.model)
    except ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    loaded = load_model_files(path, prepare_tensor, FORMAT_ID)
    model = Qwen2Model.from_tensors(loaded.config, loaded.tensors)
    prompt = source_tokens(Tokenizer.from_gguf_data(loaded.tokenizer_data), args.prompt)
    print(f"# bench/branches.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"date: {datetime.datetime.now().isoformat(timespec='seconds')}; {path.name}; threads {args.threads}; "
          f"load average {os.getloadavg()[0]:.2f} at start")

    cache = KVCache(model.config)
    t0 = time.perf_counter()
    model.forward(torch.tensor(prompt), torch.arange(len(prompt)), cache, last_only=True)
    prefill_s = time.perf_counter() - t0
    generate_branches(model, cache, prompt, 2, SAMPLING, 8)  # warm-up: kernel plans, first touch of the weights

    times: dict[str, list[float]] = {f"N={n}": [] for n in ns} | {"plain generate": []}
    since = mark()
    for rep in range(args.reps + 1):  # every figure once per round, so load that comes and goes hits all of them
        for n in ns:
            t0 = time.perf_counter()
            branches = generate_branches(model, cache, prompt, n, SAMPLING, args.tokens)
            times[f"N={n}"].append(time.perf_counter() - t0)
            assert [len(b.tokens) for b in branches] == [args.tokens] * n and cache.tokens == prompt
        t0 = time.perf_counter()
        plain = list(generate(model, cache, prompt, dataclasses.replace(SAMPLING, seed=0), max_tokens=args.tokens, speculation=False))
        times["plain generate"].append(time.perf_counter() - t0)
        cache.truncate(len(prompt))
    others = others_share(since)
    median = {k: statistics.median(v[1:]) for k, v in times.items()}

    # Exactness: greedy branches are the plain greedy continuation.
    greedy = Sampling(temperature=0.0)
    t0 = time.perf_counter()
    same = [b.tokens for b in generate_branches(model, cache, prompt, max(ns), greedy, args.tokens)]
    greedy_s = time.perf_counter() - t0  # one text: its branches share one row of each step
    ref = list(generate(model, cache, prompt, greedy, max_tokens=args.tokens, speculation=False))
    cache.truncate(len(prompt))
    # Going on with a winner: copy its new positions, or re-feed its tokens.
    winner, fed = branches[-1], branches[-1].tokens[:-1]
    t0 = time.perf_counter()
    keep(cache, winner)
    copy_s = time.perf_counter() - t0
    cache.truncate(len(prompt))
    t0 = time.perf_counter()
    model.forward(torch.tensor(fed), torch.arange(len(prompt), len(prompt) + len(fed)), cache)
    refeed_s = time.perf_counter() - t0
    per_token = 2 * model.config.num_layers * model.config.num_kv_heads * model.config.head_dim * cache.k.element_size()

    print()
    print(f"| {args.tokens} tokens per branch after a {len(prompt)}-token prompt | seconds | tok/s (all branches) "
          f"| vs N=1 | target |")
    print("|---|---|---|---|---|")
    base = median[f"N={ns[0]}"] if ns[0] == 1 else None
    for n in ns:
        t = median[f"N={n}"]
        ratio = f"{t / base:.2f}x" if base else "-"
        target = "<= 2x" if n == 4 else ""
        print(f"| N={n} branches decoded together | {t:.2f} | {n * args.tokens / t:.1f} | {ratio} | {target} |")
    t = median["plain generate"]
    print(f"| plain generate, 1 sequence (speculation off) | {t:.2f} | {args.tokens / t:.1f} | "
          f"{f'{t / base:.2f}x' if base else '-'} | |")
    print()
    print(f"- median of {args.reps} rounds after a warm-up; others' CPU {'-' if others is None else f'{100 * others:.0f}%'} "
          f"while timing (other processes' share of the cores)")
    print(f"- prompt prefill (once, shared by all branches, not in the figures): {prefill_s:.2f} s")
    first = [first_difference(s, ref) for s in same]
    print(f"- greedy: {max(ns)} branches " + ("equal plain greedy decoding" if first == [None] * len(same) else
          f"differ from plain greedy decoding from token {first} on (a near-tie flipped by fp32 rounding)")
          + f"; {greedy_s:.2f} s for all {max(ns)} (one text: one row a step; one run, not a median)")
    j = first_difference(branches[0].tokens, plain)
    print(f"- sampled: branch 0 (seed 0) {'equals' if j is None else f'differs from token {j} on from'} plain generate "
          "with seed 0")
    print(f"- K/V: the prompt's stays shared ({len(prompt) * per_token / 2**20:.1f} MiB, {cache.dtype}); each branch "
          f"holds its own {args.tokens} positions ({args.tokens * per_token / 2**20:.1f} MiB); a winner kept by keep(): "
          f"{copy_s * 1000:.2f} ms, by re-feeding its {len(fed)} tokens: {refeed_s * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
