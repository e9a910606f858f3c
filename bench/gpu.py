"""GPU figures of the CUDA path (runtime/cuda.py + runtime/kernels/), each against the HBM roofline; one table.

    python bench/gpu.py                    # 0.5B and 1.5B, bf16, batch 1 (~3-5 min on one H200)
    python bench/gpu.py --models 0.5b --quick
    python bench/gpu.py --peak-gbps 3350   # peak HBM bandwidth when the device name is not in PEAK_GBPS

Weights: the registered GGUF when it is installed (converted once to bf16 in the model cache), otherwise
random bf16 weights of the same shapes (speed does not depend on the values; the table says which).
Rows, per model, all batch 1, measured in this run:
  decode    tokens/s over DECODE_STEPS steps after CONTEXT tokens, four ways: eager torch (torch norms, RoPE,
            SDPA: the in-run baseline), our Triton kernels eager, Triton kernels + CUDA graphs, and the same with
            cuBLAS for the projections instead of runtime.kernels.dense (faster or not, its verify rows are not
            bit-equal to decode steps)
  prefill   tokens/s of a PREFILL-token prompt into a fresh cache (chunks of 1024; kernels + SDPA)
  verify    one forward of k=8 tokens at CONTEXT, graphs on, as a multiple of one decode step
  peer      HF transformers on the same shapes, static cache + torch.compile (bench/gpu_peer.py), decode only;
            skipped with a line saying why when transformers is not importable or the time budget is short
"roofline" = the time the step's bytes (every weight once, the KV read for its context) take at peak HBM
bandwidth divided by the measured time; 1.0 is the physical limit. Prefill also shows its share of peak
bf16 dense FLOP/s (2 x params per token), the bound that matters there. Median of REPS repetitions.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import statistics
import sys
import time
from pathlib import Path

import torch

# Run as a script, this file's folder is first on sys.path, and bench/runtime.py would shadow the runtime
# package (even with the repository root on PYTHONPATH: that comes after it). Drop the folder; put the root first.
ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime import cuda  # noqa: E402
from runtime.config import ModelConfig  # noqa: E402

_spec = importlib.util.spec_from_file_location("gpu_peer", Path(__file__).resolve().parent / "gpu_peer.py")
gpu_peer = importlib.util.module_from_spec(_spec)  # by path: this folder is off sys.path (see above)
_spec.loader.exec_module(gpu_peer)
PEER_MIN_BUDGET_S = 120  # compiling the peer takes about a minute; skip it when less is left

PEAK_GBPS = {"H200": 4800, "H100 NVL": 3900, "H100 PCIe": 2000, "H100": 3350, "H800": 3350, "A100-SXM4-80GB": 2039,
             "A100 80GB PCIe": 1935, "A100": 1555, "L40S": 864, "L40": 864, "L4": 300, "A10G": 600, "A10": 600,
             "RTX 4090": 1008, "RTX 3090": 936, "B200": 8000}
PEAK_TFLOPS = {"H200": 989, "H100": 989, "H800": 989, "A100": 312, "L40S": 362, "L40": 181, "L4": 121, "A10": 125,
               "RTX 4090": 165, "B200": 2250}

SHAPES = {  # Qwen2.5-Coder configs (GGUF metadata of the registered files)
    "0.5b": ModelConfig(arch="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864, num_layers=24,
                        num_heads=14, num_kv_heads=2, head_dim=64, rope_theta=1e6, context_length=32768),
    "1.5b": ModelConfig(arch="qwen2", vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_layers=28,
                        num_heads=12, num_kv_heads=2, head_dim=128, rope_theta=1e6, context_length=32768),
}
REGISTRY = {"0.5b": None, "1.5b": "qwen2.5-coder-1.5b"}  # runtime.models.resolve_model specs


def lookup(table: dict, name: str) -> float | None:
    for key in sorted(table, key=len, reverse=True):  # most specific first ("H100 NVL" before "H100")
        if key.lower() in name.lower():
            return table[key]
    return None


def random_tensors(cfg: ModelConfig, device) -> dict[str, torch.Tensor]:
    """GGUF-named bf16 / fp32 tensors made on the device (std 0.02; norms 1)."""
    g = torch.Generator(device=device).manual_seed(0)
    device = torch.device(device)

    def w(*shape):
        return (torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16) * 0.02)

    hd_q, hd_kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    t = {"token_embd.weight": w(cfg.vocab_size, cfg.hidden_size),
         "output_norm.weight": torch.ones(cfg.hidden_size, device=device)}
    for i in range(cfg.num_layers):
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = torch.ones(cfg.hidden_size, device=device)
        t[p + "ffn_norm.weight"] = torch.ones(cfg.hidden_size, device=device)
        for x, n in (("q", hd_q), ("k", hd_kv), ("v", hd_kv)):
            t[f"{p}attn_{x}.weight"] = w(n, cfg.hidden_size)
            t[f"{p}attn_{x}.bias"] = torch.zeros(n, device=device)
        t[p + "attn_output.weight"] = w(cfg.hidden_size, hd_q)
        t[p + "ffn_gate.weight"] = w(cfg.intermediate_size, cfg.hidden_size)
        t[p + "ffn_up.weight"] = w(cfg.intermediate_size, cfg.hidden_size)
        t[p + "ffn_down.weight"] = w(cfg.hidden_size, cfg.intermediate_size)
    return t


def load(name: str, device, use_real: bool):
    """(config, tensors, source) for one model: the installed GGUF converted to bf16, else random weights."""
    if use_real:
        try:
            from runtime.gguf_loader import load_model_files
            from runtime.models import resolve_model
            from runtime.options import RuntimeOptions

            cache_dir = RuntimeOptions.from_env(os.environ).cache_dir
            path = resolve_model(REGISTRY[name], cache_dir)
            loaded = load_model_files(path, cuda.prepare_tensor, cuda.FORMAT_ID, cache_dir)
            return loaded.config, loaded.tensors, f"GGUF {path.name} (bf16)"
        except Exception as e:  # not installed here: shapes are what matter for speed
            print(f"  {name}: real weights unavailable ({type(e).__name__}: {str(e)[:80]}); random bf16 weights")
    cfg = SHAPES[name]
    return cfg, random_tensors(cfg, device), "random bf16, real shapes"


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn, reps: int) -> float:
    """Median seconds of fn() over reps runs (after one warm-up), synchronized."""
    fn()
    sync()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def prefilled(model, context: int, vocab: int):
    cache = model.new_cache(capacity=max(1024, context + 256))
    toks = torch.randint(0, vocab, (context,))
    model.forward(toks, torch.arange(context), cache, last_only=True)
    return cache


def decode_seconds(model, cache, steps: int, reps: int) -> float:
    """Seconds per decode step: `steps` single-token forwards from the cache's length, then truncate back."""
    base = cache.length
    tok = torch.tensor([1])

    def run():
        cache.truncate(base)
        for i in range(steps):
            model.forward(tok, torch.tensor([base + i]), cache)

    return timed(run, reps) / steps


def block_seconds(model, cache, k: int, reps: int, inner: int = 20) -> float:
    base = cache.length
    toks, pos = torch.ones(k, dtype=torch.long), torch.arange(base, base + k)

    def run():
        for _ in range(inner):
            cache.truncate(base)
            model.forward(toks, pos, cache)

    return timed(run, reps) / inner


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="0.5b,1.5b")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--decode-steps", type=int, default=128)
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="fewer steps and repetitions (smoke run)")
    ap.add_argument("--random", action="store_true", help="random weights even when the GGUF is installed")
    ap.add_argument("--peak-gbps", type=float, default=None, help="peak HBM GB/s (default: from the device name)")
    ap.add_argument("--peak-tflops", type=float, default=None, help="peak dense bf16 TFLOP/s (default: from the name)")
    ap.add_argument("--budget-s", type=float, default=420, help="skip what is left after this many seconds")
    ap.add_argument("--no-peer", action="store_true", help="skip HF transformers (static cache + torch.compile)")
    ap.add_argument("--peer-models", default="0.5b", help="models the peer runs on (it compiles for each)")
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="check this script on a CPU: a tiny random model, kernels in Triton's interpreter, graphs emulated")
    args = ap.parse_args(argv)
    if args.cpu_smoke:
        tiny = ModelConfig(arch="qwen2", vocab_size=512, hidden_size=128, intermediate_size=256, num_layers=2,
                           num_heads=4, num_kv_heads=2, head_dim=32, context_length=4096)
        SHAPES.clear()
        SHAPES.update({"0.5b": tiny, "1.5b": tiny})
        args.random, args.context, args.decode_steps, args.reps, args.prefill = True, 40, 3, 1, 64
        args.peak_gbps, args.peak_tflops = args.peak_gbps or 20, args.peak_tflops or 0.1
    elif not torch.cuda.is_available():
        sys.exit("bench/gpu.py: no CUDA device (torch.cuda.is_available() is False); --cpu-smoke checks the script")
    if args.quick:
        args.decode_steps, args.reps, args.prefill = 32, 3, 1024
    t_start = time.perf_counter()
    dev = torch.device("cpu" if args.cpu_smoke else "cuda")
    name = "CPU (smoke run)" if args.cpu_smoke else torch.cuda.get_device_name(dev)
    gbps = args.peak_gbps or lookup(PEAK_GBPS, name)
    tflops = args.peak_tflops or lookup(PEAK_TFLOPS, name)
    if gbps is None:
        sys.exit(f"bench/gpu.py: peak bandwidth of {name!r} unknown; pass --peak-gbps")
    print(f"device: {name}; peak HBM {gbps:.0f} GB/s; peak bf16 {tflops or '?'} TFLOP/s; torch {torch.__version__}")
    print(f"decode: {args.decode_steps} steps after {args.context} tokens; prefill: {args.prefill} tokens; median of {args.reps}")
    rows = []

    def stopped(signum, frame):  # `timeout` ends a run that overran: keep what was measured
        print(f"\nstopped by signal {signum}; the rows measured so far:")
        print_table(rows, t_start)
        sys.exit(124)

    signal.signal(signal.SIGTERM, stopped)

    def row(model_name, figure, how, seconds, nbytes, tokens=1, flops=None):
        tps = tokens / seconds
        roof = nbytes / (gbps * 1e9) / seconds
        extra = f"  {flops / seconds / (tflops * 1e12):.2f} of peak FLOP/s" if flops and tflops else ""
        rows.append((model_name, figure, how, seconds * 1e3, tps, roof, extra))
        print(f"  {model_name:5} {figure:8} {how:26} {seconds * 1e3:9.3f} ms {tps:10.1f} tok/s  roofline {roof:5.2f}{extra}",
              flush=True)

    for mname in [m.strip().lower() for m in args.models.split(",") if m.strip()]:
        if time.perf_counter() - t_start > args.budget_s:
            print(f"  {mname}: skipped (time budget of {args.budget_s:.0f} s spent)")
            continue
        t0 = time.perf_counter()
        cfg, tensors, source = load(mname, dev, not args.random)
        models = {
            "eager torch (baseline)": cuda.build_cuda_model(cfg, tensors, device=dev, use_triton=False),
            "triton kernels, eager": None,
            "triton kernels + graphs": None,
            "kernels + graphs, cuBLAS": None,
        }
        # The three variants share the weights: build once, flip the switches.
        base = models["eager torch (baseline)"]
        for key, (triton_on, graphs_on) in (("triton kernels, eager", (True, None)), ("triton kernels + graphs", (True, "cuda")),
                                            ("kernels + graphs, cuBLAS", (True, "cuda"))):
            m = cuda.CudaModel(cfg, base.embed, base.blocks, base.output_norm, base.head, device=dev, use_triton=triton_on,
                               graphs=(graphs_on == "cuda") and ("emulate" if args.cpu_smoke else True))
            m.logits_to_cpu = False
            m.dense_kernel = key != "kernels + graphs, cuBLAS"  # cuBLAS for T <= 16 too, what kernels.dense replaced
            models[key] = m
        base.logits_to_cpu = False
        del tensors
        params = sum(p.numel() for b in base.blocks for lin in (b.qkv, b.attn_output, b.gate_up, b.ffn_down)
                     for p in [lin.weight]) + base.head.weight.numel()
        wbytes = base.weight_bytes
        kv_per_tok = 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * 2
        print(f"{mname}: {source}; {params / 1e9:.2f} B matmul params, {wbytes / 1e9:.3f} GB weights read per step, "
              f"KV {kv_per_tok} B/token; load {time.perf_counter() - t0:.1f} s", flush=True)
        step_bytes = wbytes + kv_per_tok * (args.context + args.decode_steps // 2)
        # Agreement first: the same context and tokens through the baseline and through kernels + graphs.
        torch.manual_seed(1)
        ctx = torch.randint(0, cfg.vocab_size, (args.context,))
        outs = []
        for how in ("eager torch (baseline)", "triton kernels + graphs"):
            m = models[how]
            c = m.new_cache(capacity=args.context + 64)
            m.forward(ctx, torch.arange(args.context), c, last_only=True)
            outs.append(torch.cat([m.forward(torch.tensor([t]), torch.tensor([c.length]), c) for t in (3, 4, 5)]
                                  + [m.forward(torch.arange(6, 14), torch.arange(c.length, c.length + 8), c)]))
        diff = float((outs[0] - outs[1]).abs().max() / outs[0].abs().max())
        same = float((outs[0].argmax(-1) == outs[1].argmax(-1)).float().mean())
        print(f"  agreement, kernels + graphs vs eager torch over 3 decodes + verify8: max |diff| {diff:.4f} of max |logit|,"
              f" argmax equal {same:.0%}", flush=True)
        decode_s = {}
        for how, model in models.items():
            cache = prefilled(model, args.context, cfg.vocab_size)
            decode_s[how] = decode_seconds(model, cache, args.decode_steps, args.reps)
            row(mname, "decode", how, decode_s[how], step_bytes)
            del cache
        graphs = models["triton kernels + graphs"]
        cache = prefilled(graphs, args.context, cfg.vocab_size)
        one = block_seconds(graphs, cache, 1, args.reps)
        k8 = block_seconds(graphs, cache, 8, args.reps)
        row(mname, "verify8", "triton + graphs, k=8", k8, wbytes + kv_per_tok * (args.context + 8), tokens=8)
        print(f"  {mname:5} verify k=8 costs {k8 / one:.2f}x one decode step ({one * 1e3:.3f} ms)")
        del cache
        for how in ("eager torch (baseline)", "triton kernels, eager"):
            model = models[how]

            def run(model=model):
                c = model.new_cache(capacity=args.prefill + 16)
                model.forward(torch.randint(0, cfg.vocab_size, (args.prefill,)), torch.arange(args.prefill), c, last_only=True)

            s = timed(run, max(2, args.reps // 2))
            chunks = -(-args.prefill // graphs.prefill_chunk)
            row(mname, "prefill", how, s, chunks * wbytes + kv_per_tok * args.prefill * chunks, tokens=args.prefill,
                flops=2 * params * args.prefill)
        b = decode_s["eager torch (baseline)"]
        print(f"  {mname:5} decode speed-up over eager torch: kernels {b / decode_s['triton kernels, eager']:.2f}x, "
              f"kernels + graphs {b / decode_s['triton kernels + graphs']:.2f}x", flush=True)
        del models, base, graphs
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        left = args.budget_s - (time.perf_counter() - t_start)
        if args.no_peer or mname not in [m.strip().lower() for m in args.peer_models.split(",")]:
            continue
        if left < PEER_MIN_BUDGET_S and not args.cpu_smoke:
            print(f"  {mname:5} peer skipped: {left:.0f} s of the time budget left, it needs ~{PEER_MIN_BUDGET_S} s")
            continue
        seconds, note = gpu_peer.decode_seconds(cfg, args.context, args.decode_steps, args.reps, dev,
                                                compile_forward=not args.cpu_smoke)
        if seconds is None:
            print(f"  {mname:5} peer skipped: {note}", flush=True)
            rows.append((mname, "decode", "HF transformers: skipped", float("nan"), float("nan"), float("nan"), f"  {note}"))
            continue
        print(f"  {mname:5} peer: {note}")
        row(mname, "decode", "HF static cache" + (" (eager)" if args.cpu_smoke else " + compile"), seconds, step_bytes)
        ours = decode_s["triton kernels + graphs"]
        print(f"  {mname:5} decode: ours (kernels + graphs) at {seconds / ours:.2f}x the peer's speed", flush=True)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    print_table(rows, t_start)


def print_table(rows, t_start) -> None:
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s")
    print("| model | figure | how | ms | tok/s | fraction of HBM roofline |")
    print("|---|---|---|---|---|---|")
    for m, f, how, ms, tps, roof, extra in rows:
        if ms != ms:  # NaN: a row skipped, its reason in `extra`
            print(f"| {m} | {f} | {how} | - | - | -{extra.replace('  ', '; ')} |")
            continue
        print(f"| {m} | {f} | {how} | {ms:.3f} | {tps:.1f} | {roof:.2f}{extra.replace('  ', '; ')} |")


if __name__ == "__main__":
    main()
