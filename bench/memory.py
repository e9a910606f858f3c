"""Memory of a fresh process serving the model: ours vs llama.cpp on the same GGUF, same token ids, one table.

    python bench/memory.py                 # the default model (the 1.5B), 2,048 prompt tokens, 32 decoded
    python bench/memory.py --no-peer       # ours only

Each engine runs in its own fresh process (the model already converted and cached: run any other bench or the
agent once first): load, prefill the first N tokens of real Python source, decode 32 greedy tokens, then read
/proc/self/status. Figures (MiB):
  peak RSS     VmHWM: the most memory the process held at once
  RSS          VmRSS at the end, the sum of
  anonymous    RssAnon: the process's own memory (copies of weights, KV cache, activations, libraries' heaps)
  file-backed  RssFile: pages of mapped files (converted weights and kernel packs for ours, the GGUF for
               llama.cpp, shared libraries), shared with the page cache and other processes mapping them
Our KV cache grows with the session; llama.cpp's is allocated for n_ctx = N + 64.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FIELDS = {"VmHWM": "peak RSS", "VmRSS": "RSS at the end", "RssAnon": "anonymous", "RssFile": "file-backed"}
DECODE_TOKENS = 32


def status_mib() -> dict[str, float]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in FIELDS:
            out[key] = int(value.split()[0]) / 1024  # kB -> MiB
    return out


def run_ours(spec: str | None, tokens: list[int], threads: int) -> dict:
    import os

    from runtime.api import Sampling
    from runtime.engine import LocalEngine
    from runtime.generate import generate
    from runtime.kv_cache import KVCache
    from runtime.options import RuntimeOptions

    t0 = time.perf_counter()
    engine = LocalEngine.from_spec(spec, RuntimeOptions.from_env(os.environ), threads=threads, prefix_cache_bytes=0)
    loaded = time.perf_counter() - t0
    cache = KVCache(engine.model.config, model_id=engine.model_id)
    out = list(generate(engine.model, cache, tokens, Sampling(max_tokens=DECODE_TOKENS), stop_ids=()))
    return {"load_s": loaded, "decoded": out, **status_mib()}


def run_peer(spec: str | None, tokens: list[int], threads: int) -> dict:
    from llama_cpp import Llama

    from runtime.models import resolve_model

    t0 = time.perf_counter()
    llm = Llama(model_path=str(resolve_model(spec)), n_threads=threads, n_threads_batch=threads, n_batch=512,
                n_ctx=len(tokens) + 2 * DECODE_TOKENS, logits_all=False, verbose=False)
    loaded = time.perf_counter() - t0
    out = []
    for token in llm.generate(tokens, temp=0.0):
        out.append(token)
        if len(out) == DECODE_TOKENS:
            break
    return {"load_s": loaded, "decoded": out, **status_mib()}


def prompt_tokens(spec: str | None, n: int) -> list[int]:
    """The first n tokens of stdlib source, as bench/runtime.py feeds both engines (our tokenizer's ids)."""
    from runtime.gguf_loader import read_model_info
    from runtime.models import resolve_model
    from runtime.tokenizer import Tokenizer

    loader = importlib.util.spec_from_file_location("bench_runtime", ROOT / "bench" / "runtime.py")
    bench_runtime = importlib.util.module_from_spec(loader)
    sys.modules["bench_runtime"] = bench_runtime  # its dataclasses look their module up there
    loader.loader.exec_module(bench_runtime)
    tokenizer = Tokenizer.from_gguf_data(read_model_info(resolve_model(spec)).tokenizer_data)
    return bench_runtime.source_tokens(tokenizer, n)


def in_child(engine: str, args, tokens: list[int]) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(tokens, f)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", engine, "--tokens-file", f.name,
           "--threads", str(args.threads)] + (["--model", args.model] if args.model else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    finally:
        Path(f.name).unlink(missing_ok=True)
    if out.returncode != 0:
        raise SystemExit(f"{engine} process failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="registry name or GGUF path (default: the bundled default, the 1.5B)")
    p.add_argument("--tokens", type=int, default=2048, help="prompt tokens prefilled before decoding")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-peer", action="store_true")
    p.add_argument("--child", choices=("ours", "peer"), help=argparse.SUPPRESS)
    p.add_argument("--tokens-file", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        tokens = json.loads(Path(args.tokens_file).read_text())
        run = run_ours if args.child == "ours" else run_peer
        print(json.dumps(run(args.model, tokens, args.threads)))
        return 0

    tokens = prompt_tokens(args.model, args.tokens)
    rows = {"ours": in_child("ours", args, tokens)}
    peer_note = ""
    if not args.no_peer:
        try:
            import llama_cpp  # noqa: F401
            rows["llama.cpp"] = in_child("peer", args, tokens)
        except ImportError as e:
            peer_note = f"llama.cpp: not importable ({e})"
    names = list(rows)
    print(f"Fresh process, {args.model or 'default model'}: {len(tokens)} prompt tokens prefilled, "
          f"{DECODE_TOKENS} decoded, {args.threads} threads")
    print("| figure | " + " | ".join(names) + (" | ours/llama.cpp |" if len(names) == 2 else " |"))
    print("|---|" + "---|" * (len(names) + (len(names) == 2)))
    for key, label in FIELDS.items():
        cells = [f"{rows[n][key]:.0f} MiB" for n in names]
        ratio = [f"{rows['ours'][key] / rows['llama.cpp'][key]:.2f}x"] if len(names) == 2 and rows["llama.cpp"][key] else []
        print(f"| {label} | " + " | ".join(cells + ratio) + " |")
    print("| load | " + " | ".join(f"{rows[n]['load_s']:.2f} s" for n in names) + (" | |" if len(names) == 2 else " |"))
    if len(names) == 2:
        a, b = rows["ours"]["decoded"], rows["llama.cpp"]["decoded"]
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
        print("greedy tokens identical: " + ("yes" if a == b else f"no, from token {first} of {len(a)}"))
    if peer_note:
        print(peer_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
