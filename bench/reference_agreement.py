"""Where our greedy tokens and llama.cpp's part ways, and which of the two exact fp32 math sides with.

    python bench/reference_agreement.py [--tokens 64]

For each of ten code prompts (chat-template and raw completions): llama.cpp (llama_cpp.Llama, same GGUF,
2 threads) generates greedily; then our quantized model, an exact model (every GGUF tensor dequantized
to fp32, fp32 activations: the math both implementations approximate) and llama.cpp in one batch
(logits_all) score that same sequence. Prints, per prompt, the first token where our argmax differs
from llama.cpp's greedy pick, where llama.cpp's pick and ours differ from exact math, the logit margins
there, the RMS logit error of ours and llama.cpp (batched) against exact (--ablation: also of our
int4 path alone and our int8 path alone), and the mean KL(exact || x) with top-1 agreement over all scored
positions. Ours scores in pieces of 16 tokens, so every matmul runs in the small-M kernel that decode and
verify use (--prefill-path: one batched forward, torch's large-M path). Takes a few minutes and ~4 GB of
memory (~6 GB with --ablation).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import torch

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # run as a script: keep bench/runtime.py from shadowing the runtime package

from runtime.engine import LocalEngine  # noqa: E402
from runtime.kv_cache import KVCache  # noqa: E402
from runtime.model import Qwen2Model  # noqa: E402
from runtime.models import resolve_model  # noqa: E402
from runtime.options import RuntimeOptions  # noqa: E402
from runtime.weights import prepare_tensor  # noqa: E402

CHAT = {
    "chat-fib": [{"role": "user", "content": "Write a Python function that returns the n-th Fibonacci number iteratively."}],
    "chat-sql": [{"role": "system", "content": "You are a senior engineer. Answer with code."},
                 {"role": "user", "content": "Write a SQL query that returns the 5 customers with the highest total order "
                                             "amount from tables customers(id, name) and orders(id, customer_id, amount)."}],
    "chat-bug": [{"role": "user", "content": "Find the bug:\n\n```python\ndef mean(xs):\n    total = 0\n    for x in xs:\n"
                                             "        total += x\n    return total / len(xs) - 1\n```"}],
    "chat-rust": [{"role": "user", "content": "Write a Rust function that reverses the words in a string slice and returns a String."}],
    "chat-regex": [{"role": "user", "content": "Explain what this regex matches: ^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@example\\.com$"}],
    "chat-bash": [{"role": "user", "content": "Write a bash one-liner that counts lines in all .py files under the current directory."}],
    "chat-test": [{"role": "user", "content": "Write pytest tests for a function slugify(s: str) -> str that lowercases and "
                                              "replaces spaces with dashes."}],
}
RAW = {
    "raw-code": 'import json\nfrom pathlib import Path\n\n\ndef load_config(path: Path) -> dict:\n'
                '    """Read a JSON config file, returning {} when it does not exist."""\n',
    "raw-js": "// Debounce: call fn at most once per `wait` ms\nexport function debounce(fn, wait) {\n",
    "raw-cpp": "#include <vector>\n#include <algorithm>\n\n// Returns the k largest elements in descending order.\n"
               "std::vector<int> top_k(std::vector<int> v, size_t k) {\n",
}


def exact_models(path: Path, config, ablation: bool) -> dict[str, Qwen2Model]:
    """"exact": every tensor dequantized by gguf to fp32 and kept fp32 (the reference math). With ablation,
    also our formats applied to one family only: "int4 only" (Q4_K -> int4, bf16 activations; the rest
    fp32) and "int8 only" (every other 2-D tensor -> int8 per channel; Q4_K fp32)."""
    import gguf
    from gguf.quants import dequantize

    exact: dict[str, torch.Tensor] = {}
    int4_only: dict[str, torch.Tensor] = {}
    int8_only: dict[str, torch.Tensor] = {}
    for t in gguf.GGUFReader(path).tensors:
        weight = torch.from_numpy(np.array(dequantize(t.data, t.tensor_type), dtype=np.float32))
        fp = prepare_tensor(t.name, weight, t.tensor_type.name, fmt="fp32")
        exact.update(fp)
        if ablation:
            quant = prepare_tensor(t.name, weight, t.tensor_type.name)
            is_q4k = t.tensor_type.name == "Q4_K"
            int4_only.update(quant if is_q4k else fp)
            int8_only.update(fp if is_q4k else quant)
    models = {"exact": Qwen2Model.from_tensors(config, exact)}
    if ablation:
        models |= {"int4 only": Qwen2Model.from_tensors(config, int4_only),
                   "int8 only": Qwen2Model.from_tensors(config, int8_only)}
    return models


def scores(model: Qwen2Model, seq: list[int], start: int, piece: int | None = None) -> torch.Tensor:
    """Logits predicting seq[start:] from its prefixes: one batched forward, or forwards of `piece` tokens."""
    cache, step = KVCache(model.config), piece or len(seq)
    logits = torch.cat([model.forward(torch.tensor(seq[i:i + step]), torch.arange(i, min(i + step, len(seq))), cache)
                        for i in range(0, len(seq), step)])
    return logits[start - 1 : len(seq) - 1]


def kl_top1(ref: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per position: KL(softmax(ref) || softmax(x)) and whether the argmaxes agree."""
    lp, lq = torch.log_softmax(ref.double(), -1), torch.log_softmax(x.double(), -1)
    return (lp.exp() * (lp - lq)).sum(-1), ref.argmax(-1) == x.argmax(-1)


def first_diff(picks: torch.Tensor, ref: list[int]) -> int | None:
    return next((i for i, (a, b) in enumerate(zip(picks.tolist(), ref)) if a != b), None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--model", default=None)
    ap.add_argument("--ablation", action="store_true",
                    help="also the RMS logit error of our int4 path alone and our int8 path alone")
    ap.add_argument("--prefill-path", action="store_true",
                    help="score ours in one batched forward (torch's large-M path) instead of 16-token pieces")
    args = ap.parse_args(argv)
    piece = None if args.prefill_path else 16
    from llama_cpp import Llama

    options = RuntimeOptions.from_env(os.environ)
    path = resolve_model(args.model, options.cache_dir)
    engine = LocalEngine.from_spec(str(path), options, threads=2)
    models = exact_models(path, engine.model.config, args.ablation)
    exact, variants = models.pop("exact"), models
    llm = Llama(model_path=str(path), n_threads=2, n_threads_batch=2, n_ctx=1024, logits_all=True, verbose=False)
    prompts = {k: engine.builder.render_tokens(v) for k, v in CHAT.items()}
    prompts |= {k: engine.tokenizer.encode(v) for k, v in RAW.items()}
    n = args.tokens
    print(f"first differing generated token (of {n}; '-' = none) and logit margins there\n")
    extra = "".join(f" / {k}" for k in variants)
    print("| prompt | ours vs llama.cpp | llama.cpp vs exact | ours vs exact | margins at the first difference "
          f"(ours' pick minus llama.cpp's: ours / llama.cpp batched / exact) | RMS logit error vs exact: ours / llama.cpp{extra} |")
    print("|---|---|---|---|---|---|")
    stats: dict[str, list] = {}
    for name, prompt in prompts.items():
        llm.reset()
        ref = []
        for token in llm.generate(prompt, temp=0.0):
            ref.append(token)
            if len(ref) == n:
                break
        seq = prompt + ref
        llm.reset()
        llm.eval(seq)
        theirs = torch.from_numpy(np.array(llm.scores[len(prompt) - 1 : len(seq) - 1], dtype=np.float32))
        ours, ex = scores(engine.model, seq, len(prompt), piece), scores(exact, seq, len(prompt))
        for key, x in (("ours", ours), ("llama.cpp", theirs)):
            kl, top1 = kl_top1(ex, x)
            stats.setdefault(key, []).append((kl, top1))
        d_ours, d_llama = first_diff(ours.argmax(-1), ref), first_diff(ex.argmax(-1), ref)
        d_exact = first_diff(ours.argmax(-1), ex.argmax(-1).tolist())
        margins = "-"
        if d_ours is not None:
            i, a, b = d_ours, int(ours[d_ours].argmax()), ref[d_ours]
            margins = " / ".join(f"{float(x[i][a] - x[i][b]):+.3f}" for x in (ours, theirs, ex))
        others = [scores(m, seq, len(prompt)) for m in variants.values()]
        rms = " / ".join(f"{float((x - ex).pow(2).mean().sqrt()):.3f}" for x in (ours, theirs, *others))
        show = lambda d: "-" if d is None else str(d)  # noqa: E731
        print(f"| {name} | {show(d_ours)} | {show(d_llama)} | {show(d_exact)} | {margins} | {rms} |", flush=True)
    print()
    for key, rows in stats.items():
        kl, top1 = torch.cat([r[0] for r in rows]), torch.cat([r[1] for r in rows])
        print(f"{key}: mean KL vs exact {float(kl.mean()):.5f}, top-1 agreement {float(top1.float().mean()):.1%} "
              f"over {len(kl)} positions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
