"""A scripted 20-turn agent session replayed on our engine and on llama.cpp's server, in one run; one table.

    python bench/session.py               # 20 turns, 16 generated tokens per turn (~6 min on 2 cores)
    python bench/session.py --quick       # 6 turns: a smoke run, not figures to quote
    python bench/session.py --no-peer     # ours only

The session is what the agent sends: its system prompt and tool schemas (agent.context, the tool set
offered to the model), a first user message built by agent.context.ContextBuilder (memory file, env
block, then the request) in a scratch project whose AGENTS.md is short, then 19 rounds of
assistant reply + tool result (real Read/Grep/Glob/Bash results from this repository, run through the
real tools) and a final user follow-up. Each engine's assistant message is the text it generated
itself (cut at --max-tokens), as a real agent would send back; the tool results are the same for
both, so prompts match except for the model's own replies.

Ours: runtime.engine.LocalEngine, in this process, prefix store off (the session starts cold, like the
peer). reused/prefilled/TTFT come from Usage (TTFT from the start of generation to the first token).
llama.cpp: `python -m llama_cpp.server` (llama-cpp-python) on loopback, same GGUF, --n_threads 2,
--cache true (RAM prompt cache), driven through agent.engines.openai like `agent --engine openai`.
Its reused/prefilled figures are parsed from the server's log ("N prefix-match hit, remaining M
prompt tokens to eval"); its TTFT is the client's time to the first streamed token (loopback HTTP
included). "turn s" is each engine's whole call, client side.

Warm start across processes: two fresh `python bench/session.py --first-turn ...` processes over one
empty prefix-store dir; the first (cold) stores the prompt KV, the second (warm) asks something
else in the same project. Reported: their first turn's prompt/reused/prefilled tokens and TTFT.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file's folder is first on sys.path and its name would shadow the runtime package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from runtime.api import Done, Request, Sampling, TextDelta, ToolCall, Usage  # noqa: E402

AGENTS_MD = """# Contributor guide

- Tests: `python -m pytest -q`; fast ones: `python -m pytest -m "not slow"`.
- runtime/ never imports agent/; tools/ never import runtime.
- Persisted files are written atomically; expected failures are one-line errors.
"""

FIRST_REQUEST = "The KV cache save/load path needs a review: find where sessions are saved and check it is atomic."
WARM_REQUEST = "Which tests cover the tokenizer? List them."

# (tool name, arguments) for rounds 2..20; results come from running the real tools on this repository.
CALLS = [
    ("Grep", {"pattern": "def save", "path": "runtime", "output_mode": "content"}),
    ("Read", {"file_path": "runtime/kv_cache.py", "offset": 100, "limit": 14}),
    ("Read", {"file_path": "runtime/kv_cache.py", "offset": 114, "limit": 12}),
    ("Grep", {"pattern": "save_session", "output_mode": "files_with_matches"}),
    ("Read", {"file_path": "runtime/engine.py", "offset": 150, "limit": 12}),
    ("Glob", {"pattern": "tests/runtime/test_rt_kv*.py"}),
    ("Read", {"file_path": "tests/runtime/test_rt_kv_cache.py", "limit": 14}),
    ("Bash", {"command": "git log --oneline -5 -- runtime/kv_cache.py"}),
    ("Grep", {"pattern": "os.replace", "path": "runtime", "output_mode": "content"}),
    ("Read", {"file_path": "runtime/models.py", "offset": 1, "limit": 12}),
    ("Grep", {"pattern": "fsync", "output_mode": "content", "path": "runtime"}),
    ("Read", {"file_path": "agent/session.py", "limit": 12}),
    ("Bash", {"command": "wc -l runtime/kv_cache.py runtime/engine.py"}),
    ("Grep", {"pattern": "KVCacheFileError", "output_mode": "files_with_matches"}),
    ("Read", {"file_path": "runtime/kv_cache.py", "offset": 128, "limit": 12}),
    ("Glob", {"pattern": "runtime/*.py"}),
    ("Read", {"file_path": "runtime/config.py", "limit": 12}),
    ("Bash", {"command": "git status --short | head -5"}),
    ("Grep", {"pattern": "def load", "path": "runtime/kv_cache.py", "output_mode": "content"}),
]
FOLLOW_UP = "Good. Summarise what you found in three sentences."
MAX_RESULT_CHARS = 1200  # tool results are cut like this to keep the run to minutes


# --- the scripted session ------------------------------------------------------------------------

def agent_context(project: Path, engine_for_size=None):
    """System prompt, tool schemas and ContextBuilder, as `agent -p` builds them."""
    import tools as tools_pkg
    from agent.core.context import ContextBuilder, system_prompt, tool_schemas, tools_for_profile
    from agent.core.profile import choose_profile, model_parameters
    from agent.harness.tools import harness_tools, offered_order

    tools = offered_order(tools_pkg.builtin_tools() + harness_tools())
    tools = tools_for_profile(tools, choose_profile(model_parameters(engine_for_size) if engine_for_size else 494_000_000), "default")
    empty = project / ".no-home"
    empty.mkdir(exist_ok=True)
    return system_prompt(), tool_schemas(tools), ContextBuilder(project, project, empty, empty), tools


def tool_results(tools) -> list[str]:
    from tools.base import ToolContext

    by_name = {t.name: t for t in tools}
    ctx = ToolContext(cwd=REPO, env={})
    out = []
    for name, args in CALLS:
        result = by_name[name].run(dict(args), ctx)
        text = result.content
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + "\n[... cut]"
        out.append(text)
    return out


def make_project(root: Path) -> Path:
    project = root / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / "AGENTS.md").write_text(AGENTS_MD)
    return project


def first_messages(system: str, builder, request: str) -> list[dict]:
    return [{"role": "system", "content": system},
            {"role": "user", "content": builder.user_content(request, first=True, todos=[])}]


def replay(engine, session_id: str, first: list[dict], schemas: list[dict], results: list[str], turns: int,
           max_tokens: int, label: str, usage_of=None) -> list[dict]:
    """Run the session on `engine`; one row per engine call."""
    messages = list(first)
    rows = []
    for turn in range(turns):
        if turn > 0:
            name, args = CALLS[turn - 1] if turn - 1 < len(CALLS) else ("Bash", {"command": "true"})
            messages.append({"role": "assistant", "content": rows[-1]["reply"]})
            if turn == turns - 1:
                messages.append({"role": "user", "content": FOLLOW_UP})
            else:
                messages.append({"role": "tool", "tool_call_id": f"call_{turn}", "name": name,
                                 "content": results[turn - 1]})
        t0 = time.perf_counter()
        parts, done = [], None
        for e in engine.stream(Request(session_id, list(messages), schemas, Sampling(max_tokens=max_tokens))):
            if isinstance(e, TextDelta):
                parts.append(e.text)
            elif isinstance(e, ToolCall):
                parts.append(e.raw)
            elif isinstance(e, Done):
                done = e
        wall = time.perf_counter() - t0
        if done is None or done.error:
            raise TurnFailed(f"{label}: turn {turn + 1} failed: {done.error if done else 'no Done'}", rows)
        u: Usage = usage_of(done.usage) if usage_of else done.usage
        rows.append({"turn": turn + 1, "prompt": u.prompt_tokens, "reused": u.reused_tokens,
                     "prefilled": u.prefilled_tokens, "generated": u.generated_tokens, "ttft": u.ttft_s,
                     "wall": wall, "reply": "".join(parts) or "OK."})
        print(f"  {label} turn {turn + 1:2}: prompt {u.prompt_tokens:5}  reused {u.reused_tokens:5}  "
              f"prefilled {u.prefilled_tokens:4}  ttft {u.ttft_s:6.2f} s  turn {wall:6.2f} s", file=sys.stderr, flush=True)
    return rows


class TurnFailed(Exception):
    def __init__(self, message: str, rows: list[dict]):
        super().__init__(message)
        self.rows = rows


# --- llama.cpp's server --------------------------------------------------------------------------

class LlamaServer:
    HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")

    def __init__(self, gguf: Path, threads: int, n_ctx: int, log: Path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log_path = log
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
             "--port", str(self.port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
             "--n_threads_batch", str(threads), "--n_batch", "512", "--cache", "true", "--cache_type", "ram",
             "--verbose", "true"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}/v1"
        self._offset = 0

    def wait_ready(self, timeout: float = 300) -> None:
        import httpx
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit("llama.cpp server exited:\n" + self.log_path.read_text()[-2000:])
            try:
                if httpx.get(self.base + "/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(1)
        raise SystemExit("llama.cpp server did not start in time")

    def usage_from_log(self, usage: Usage) -> Usage:
        """The server's own prefix reuse for the call that just ended (from its log)."""
        self.log.flush()
        text = self.log_path.read_text(errors="replace")
        new, self._offset = text[self._offset:], len(text)
        hits = self.HIT.findall(new)
        if hits:
            reused, remaining = map(int, hits[-1])
        elif "full prompt already cached" in new:
            reused, remaining = usage.prompt_tokens, 0
        else:
            reused, remaining = 0, usage.prompt_tokens
        return Usage(prompt_tokens=reused + remaining, reused_tokens=reused, prefilled_tokens=remaining,
                     generated_tokens=usage.generated_tokens, ttft_s=usage.ttft_s, decode_tps=usage.decode_tps)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


# --- warm start across processes -----------------------------------------------------------------

def first_turn_child(args) -> None:
    """`--first-turn`: a fresh process: load, run the session's first turn, print one JSON line."""
    t0 = time.perf_counter()
    from runtime.engine import LocalEngine
    from runtime.options import RuntimeOptions
    engine = LocalEngine.from_spec(args.model, RuntimeOptions.from_env(os.environ), threads=args.threads,
                                   prefix_dir=Path(args.prefix_dir))
    loaded = time.perf_counter() - t0
    project = Path(args.project)
    system, schemas, builder, _ = agent_context(project, engine)
    messages = first_messages(system, builder, args.request)
    t1 = time.perf_counter()
    if args.sample:  # verified tries' first call: N candidates from one prefill, no stream
        request = Request("first", messages, schemas, Sampling(temperature=0.6, seed=0, max_tokens=args.max_tokens))
        u, error = engine.sample(request, args.sample, greedy=1)[1], None
    else:
        done = [e for e in engine.stream(Request("first", messages, schemas, Sampling(max_tokens=args.max_tokens)))][-1]
        u, error = done.usage, done.error
    first_turn = time.perf_counter() - t1
    engine.wait_for_prefix_store()
    print(json.dumps({"prompt": u.prompt_tokens, "reused": u.reused_tokens, "prefilled": u.prefilled_tokens,
                      "ttft": u.ttft_s, "turn": first_turn, "load": loaded, "error": error,
                      "process": time.perf_counter() - t0}))


def run_child(args, project: Path, prefix_dir: Path, request: str) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--first-turn", "--project", str(project),
           "--prefix-dir", str(prefix_dir), "--request", request, "--threads", str(args.threads),
           "--max-tokens", str(args.max_tokens), "--sample", str(args.sample)] + \
        (["--model", args.model] if args.model else [])
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"first-turn process failed:\n{out.stderr[-2000:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["process_wall"] = time.perf_counter() - t0
    return row


# --- main ----------------------------------------------------------------------------------------

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="registry name or GGUF path (default: the bundled default, the 1.5B)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--turns", type=int, default=20)
    p.add_argument("--max-tokens", type=int, default=16, help="generated tokens per turn")
    p.add_argument("--quick", action="store_true", help="6 turns")
    p.add_argument("--no-peer", action="store_true")
    p.add_argument("--no-warm-start", action="store_true", help="skip the two fresh-process runs")
    p.add_argument("--sample", type=int, default=0, metavar="N",
                   help="the fresh processes' first call samples N candidates (verified tries) instead of a stream")
    p.add_argument("--first-turn", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--project", help=argparse.SUPPRESS)
    p.add_argument("--prefix-dir", help=argparse.SUPPRESS)
    p.add_argument("--request", default=FIRST_REQUEST, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.first_turn:
        first_turn_child(args)
        return 0
    turns = 6 if args.quick else args.turns
    assert 2 <= turns <= len(CALLS) + 1, f"--turns must be in 2..{len(CALLS) + 1}"

    import torch
    from runtime.engine import LocalEngine
    from runtime.models import resolve_model
    from runtime.options import RuntimeOptions

    options = RuntimeOptions.from_env(os.environ)
    work = Path(tempfile.mkdtemp(prefix="bench-session-"))
    try:
        project = make_project(work)
        t0 = time.perf_counter()
        engine = LocalEngine.from_spec(args.model, options, threads=args.threads, prefix_cache_bytes=0)
        print(f"ours: loaded in {time.perf_counter() - t0:.1f} s; torch {torch.__version__}, {args.threads} threads",
              file=sys.stderr)
        system, schemas, builder, tools = agent_context(project, engine)
        first = first_messages(system, builder, FIRST_REQUEST)
        results = tool_results(tools)
        list(engine.stream(Request("warmup", [{"role": "user", "content": "hi"}], [], Sampling(max_tokens=2))))

        peer_rows = None
        server = None
        peer_error = None
        if not args.no_peer:
            try:
                import llama_cpp  # noqa: F401
                server = LlamaServer(resolve_model(args.model, options.cache_dir), args.threads, 8192, work / "llama-server.log")
            except ImportError as e:
                peer_error = f"llama-cpp-python not importable ({e})"
        t_ours = time.perf_counter()
        ours = replay(engine, "bench", first, schemas, results, turns, args.max_tokens, "ours")
        t_ours = time.perf_counter() - t_ours
        loads = {"ours": os.getloadavg()[0]}
        del engine

        warm = None
        if not args.no_warm_start:
            store = work / "prefix-kv"
            cold_row = run_child(args, project, store, FIRST_REQUEST)
            warm_row = run_child(args, project, store, WARM_REQUEST)
            warm = (cold_row, warm_row)
        if server is not None:
            from agent.engines.openai import OpenAIEngine
            try:
                server.wait_ready()
                peer = OpenAIEngine(server.base, "qwen")
                list(peer.stream(Request("warmup", [{"role": "user", "content": "hi"}], [], Sampling(max_tokens=2))))
                server.usage_from_log(Usage())
                t_peer = time.perf_counter()
                try:
                    peer_rows = replay(peer, "bench", first, schemas, results, turns, args.max_tokens, "llama.cpp",
                                       usage_of=server.usage_from_log)
                except TurnFailed as e:  # keep the turns that ran; the log tail says why
                    peer_rows, peer_error = e.rows, str(e)
                    print(server.log_path.read_text(errors="replace")[-3000:], file=sys.stderr)
                t_peer = time.perf_counter() - t_peer
                loads["llama.cpp"] = os.getloadavg()[0]
            finally:
                server.close()

        print_report(args, turns, ours, t_ours, peer_rows, t_peer if peer_rows else None, peer_error, warm)
        print("1-minute load average at the end of each session (our 2 threads alone make ~2): "
              + ", ".join(f"{k} {v:.1f}" for k, v in loads.items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def print_report(args, turns, ours, t_ours, peer, t_peer, peer_error, warm) -> None:
    import platform
    print(f"# bench/session.py: {turns}-turn scripted agent session, {args.max_tokens} generated tokens per turn, "
          f"{args.threads} threads, {platform.machine()}, {time.strftime('%Y-%m-%d %H:%M')}")
    if peer_error:
        print(f"# llama.cpp: {peer_error}")
    head = "| turn | ours prompt | ours reused | ours prefilled | ours TTFT s | ours turn s |"
    sep = "|---|---|---|---|---|---|"
    if peer:
        head += " llama.cpp prompt | llama.cpp reused | llama.cpp prefilled | llama.cpp TTFT s | llama.cpp turn s | TTFT ratio |"
        sep += "---|---|---|---|---|---|"
    print(head)
    print(sep)
    for i, r in enumerate(ours):
        line = f"| {r['turn']} | {r['prompt']} | {r['reused']} | {r['prefilled']} | {r['ttft']:.2f} | {r['wall']:.2f} |"
        if peer and i < len(peer):
            q = peer[i]
            ratio = q["ttft"] / r["ttft"] if r["ttft"] > 0 else float("nan")
            line += f" {q['prompt']} | {q['reused']} | {q['prefilled']} | {q['ttft']:.2f} | {q['wall']:.2f} | {ratio:.2f}x |"
        print(line)

    def totals(rows):
        later = rows[1:]
        # New tokens of a turn: its prompt minus what the engine has seen (previous prompt + its reply).
        again = sum(max(0, r["prefilled"] - (r["prompt"] - prev["prompt"] - prev["generated"]))
                    for prev, r in zip(rows, later))
        return (sum(r["prefilled"] for r in rows), sum(r["prefilled"] for r in later), again,
                statistics.median(r["ttft"] for r in later))

    print()
    print("| figure | ours | llama.cpp |" if peer else "| figure | ours |")
    print("|---|---|---|" if peer else "|---|---|")
    fo = totals(ours)
    fp = totals(peer) if peer and len(peer) >= 2 else None
    if peer and len(peer) < len(ours):
        print(f"(llama.cpp ran {len(peer)} of {len(ours)} turns; its totals cover those turns only)")
    rows = [("prefilled tokens, whole session", fo[0], fp[0] if fp else None),
            ("prefilled tokens, turns 2..N", fo[1], fp[1] if fp else None),
            ("history re-prefilled, turns 2..N (prefilled minus the prompt's growth)", fo[2],
             fp[2] if fp else None),
            ("median TTFT, turns 2..N (s)", f"{fo[3]:.2f}", f"{fp[3]:.2f}" if fp else None),
            ("session wall time (s)", f"{t_ours:.1f}", f"{t_peer:.1f}" if fp and t_peer else None)]
    for name, a, b in rows:
        print(f"| {name} | {a} |" + (f" {b} |" if peer else ""))
    if warm:
        cold, hot = warm
        print()
        print("Warm start across processes (fresh process, first turn, prefix store empty vs. written by the first):")
        what = f"{args.sample} sampled candidates" if args.sample else "a stream"
        print(f"First call: {what}, {args.max_tokens} tokens each.")
        print("| process | prompt | reused | prefilled | TTFT s | first turn s | load s | process s |")
        print("|---|---|---|---|---|---|---|---|")
        for name, r in (("cold (empty store)", cold), ("warm (store from the cold one; other request)", hot)):
            print(f"| {name} | {r['prompt']} | {r['reused']} | {r['prefilled']} | {r['ttft']:.2f} | {r['turn']:.2f} | "
                  f"{r['load']:.1f} | {r['process_wall']:.1f} |")
        if hot["ttft"] > 0:
            print(f"TTFT cold/warm: {cold['ttft'] / hot['ttft']:.1f}x")


if __name__ == "__main__":
    sys.exit(main())
