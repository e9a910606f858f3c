"""Our CPU kernel alone (runtime/cpu_kernels/ck.c) on the 1.5B's shapes: matmul by rows M, attention against
torch's SDPA (the path it replaces), and optionally the kernel of another git revision, built and timed in the
same run. One table.

    python bench/kernels.py                      # this checkout's kernel (and SDPA for attention)
    python bench/kernels.py --against 31176c3    # and the kernel of that revision, side by side

Weights are random bytes in the kernel's layouts (timing does not depend on their values), activations random.
Each figure is the median over --rounds rounds of the fastest of the calls made in --seconds; the builds take
turns inside each round, so a machine that slows down slows all of them alike.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from runtime import cpu_kernels  # noqa: E402

GROUP_BYTES = {cpu_kernels.FMT_Q8I: 512, cpu_kernels.FMT_Q5I: 352, cpu_kernels.FMT_Q4I: 384}
FMT_NAMES = {cpu_kernels.FMT_Q8I: "q8i", cpu_kernels.FMT_Q5I: "q5i", cpu_kernels.FMT_Q4I: "q4i"}
# (what, format, out features N, in features K): the 1.5B's gate|up (Q4_K) and a Q6_K-born ffn_down (int8 rows)
MATMULS = [("gate|up", cpu_kernels.FMT_Q4I, 17920, 1536), ("ffn_down", cpu_kernels.FMT_Q8I, 1536, 8960)]
MS = (1, 4, 9, 16, 256)
ATTENTION = [(512, 1), (512, 9), (2048, 1), (2048, 9), (4096, 1), (4096, 9)]  # (keys, query rows)
HEADS, KV_HEADS, HEAD_DIM = 12, 2, 128


def build_revision(rev: str, out_dir: Path) -> cpu_kernels.Kernel:
    """ck.c as it was at `rev`, compiled with this checkout's flags."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:runtime/cpu_kernels/ck.c"], capture_output=True,
                            text=True, check=True).stdout
    src, lib = out_dir / "ck_rev.c", out_dir / "ck_rev.so"
    src.write_text(source)
    cc = os.environ.get("CC") or "gcc"
    subprocess.run([cc, *cpu_kernels._flags("native"), "-o", str(lib), str(src), "-lm"], check=True)
    return cpu_kernels.Kernel(lib)


def random_weights(fmt: int, n: int, k: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor | None]:
    groups = (n // 16) * (k // 32)
    data = torch.randint(0, 256, (groups, GROUP_BYTES[fmt]), dtype=torch.uint8, generator=g)
    if fmt == cpu_kernels.FMT_Q4I:  # sane fp32 scales and offsets, not random bit patterns
        data[:, :128] = torch.full((groups, 32), 0.01).view(torch.uint8)
    elif fmt == cpu_kernels.FMT_Q5I:
        data[:, :32] = torch.full((groups, 16), 0.01, dtype=torch.float16).view(torch.uint8)
    scale = torch.full((n,), 0.01) if fmt == cpu_kernels.FMT_Q8I else None
    return data.reshape(-1).contiguous(), scale


def fastest(fn, seconds: float) -> float:
    fn()
    best, end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--against", metavar="REV", help="also time the kernel of this git revision")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=0.5, help="per figure and round")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    ours = cpu_kernels.kernel()
    if ours is None:
        print("kernels: the CPU kernel is not available here (no compiler, or AGENT_CPU_KERNEL=0)", file=sys.stderr)
        return 1
    builds = {"ours": ours}
    with tempfile.TemporaryDirectory() as tmp:
        if args.against:
            builds[args.against] = build_revision(args.against, Path(tmp))
        g = torch.Generator().manual_seed(0)
        cases = []  # (label, unit, {name: fn}, macs or None)
        for what, fmt, n, k in MATMULS:
            data, scale = random_weights(fmt, n, k, g)
            for m in MS:
                x = torch.randn(m, k, generator=g)
                fns = {name: (lambda kern=kern, x=x, n=n, plan=kern.plan([(fmt, data, scale, 0, n)]):
                              kern.linear(x, plan, n, None)) for name, kern in builds.items()}  # bound now, not late
                cases.append((f"matmul {what} ({FMT_NAMES[fmt]}, {n}x{k}), M={m}", "ms", fns, m * n * k))
        for s, t in ATTENTION:
            kc, vc = torch.randn(KV_HEADS, s, HEAD_DIM, generator=g), torch.randn(KV_HEADS, s, HEAD_DIM, generator=g)
            q = torch.randn(t, HEADS, HEAD_DIM, generator=g)
            mask = torch.arange(s)[None, :] <= torch.arange(s - t, s)[:, None]

            def sdpa(q=q, kc=kc, vc=vc, mask=mask, t=t):
                if t == 1:
                    return F.scaled_dot_product_attention(q.view(1, KV_HEADS, HEADS // KV_HEADS, HEAD_DIM), kc[None], vc[None])
                return F.scaled_dot_product_attention(q.transpose(0, 1)[None], kc[None], vc[None], attn_mask=mask,
                                                      enable_gqa=True)
            fns = {name: (lambda kern=kern, q=q, kc=kc, vc=vc, s=s, t=t: kern.attention(q, kc, vc, s - t))
                   for name, kern in builds.items()}
            fns["torch SDPA"] = sdpa
            cases.append((f"attention, {t} query row{'s' if t > 1 else ''} over {s} keys (one layer)", "ms", fns, None))
        times = {label: {name: [] for name in fns} for label, _, fns, _ in cases}
        for _ in range(args.rounds):
            for label, _, fns, _ in cases:
                for name, fn in fns.items():
                    times[label][name].append(fastest(fn, args.seconds))
    names = list(builds) + ["torch SDPA"]
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "?")
    print(f"# bench/kernels.py{' --against ' + args.against if args.against else ''}")
    print(f"date: {time.strftime('%Y-%m-%dT%H:%M:%S')}; {cpu}; kernel isa {cpu_kernels.ISA_NAMES.get(ours.isa)}; "
          f"threads {args.threads}; load average {os.getloadavg()[0]:.2f} at the end\n")
    print("| figure | " + " | ".join(f"{n} (ms)" for n in names) + " | ours GMAC/s |" +
          (f" {args.against} / ours |" if args.against else ""))
    print("|---|" + "---|" * (len(names) + 1 + bool(args.against)))
    for label, _, fns, macs in cases:
        med = {n: statistics.median(v) for n, v in times[label].items()}
        cells = [f"{med[n] * 1e3:.3f}" if n in med else "-" for n in names]
        rate = f"{macs / med['ours'] / 1e9:.1f}" if macs else "-"
        ratio = f" {med[args.against] / med['ours']:.2f}x |" if args.against else ""
        print(f"| {label} | " + " | ".join(cells) + f" | {rate} |" + ratio)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
