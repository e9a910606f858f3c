"""Constrained tool calls on the real model: call validity with and without the mask, and the mask's cost.

    python bench/toolcalls.py              # greedy + 2 sampled runs per prompt, both modes (~15 min on 2 cores)
    python bench/toolcalls.py --quick      # greedy only, first 5 prompts
    python bench/toolcalls.py --show       # also print every reply

Workload: the agent's own system prompt (agent.context.system_prompt) and the tools the agent
offers this model (tools.builtin_tools filtered by agent.core.context.tools_for_profile: the core set for
models under 1B; --all-tools offers every built-in tool), as engine schemas
(tools.base.schema_for_engine), plus one short user request that needs a tool. Every prompt runs through LocalEngine.stream with Request.constrained_tools off and on, the
two modes alternating per prompt, in one session (the system prefix is prefilled once).

Figures:
  validity   each reply is a tagged call (the <tool_call> token), a bare call (untagged JSON the
             parser's fallback kept), a malformed attempt (the tag written as text; or a reply that
             starts with ``` or { and has a "name" key but yields no call: bad JSON, not an object,
             unknown tool), or text. Every call is checked: parser error (bad JSON, arguments not
             an object), unknown tool, arguments violating the tool's schema (jsonschema).
             "right tool": the first call names a tool that serves the request (a usefulness hint).
  mask cost  a call forced open (a Write request; prompt + <tool_call>), greedy, N tokens, stop tokens off,
             in a worker thread as the engine runs it: decode tokens/s with the mask off and on
             (alternating, median of reps after a warm-up) and the mask's own time per masked
             token (fill + apply + advance).
  compile    first compile of the tool list (tokenizer info included) and a cached lookup.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

# Run as a script, this file's folder is first on sys.path and its name would shadow the runtime package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import jsonschema  # noqa: E402

from agent.core.context import system_prompt, tools_for_profile  # noqa: E402
from agent.core.profile import choose_profile, model_parameters  # noqa: E402
from runtime.api import Done, Request, Sampling, TextDelta, ToolCall  # noqa: E402
from runtime.constrain import ToolGrammars  # noqa: E402
from runtime.engine import LocalEngine  # noqa: E402
from runtime.generate import generate  # noqa: E402
from runtime.kv_cache import KVCache  # noqa: E402
from runtime.models import ModelError  # noqa: E402
from runtime.options import RuntimeOptions  # noqa: E402
from runtime.toolcalls import parse_call_json  # noqa: E402
from tools import builtin_tools  # noqa: E402
from tools.base import schema_for_engine  # noqa: E402

PROMPTS = [  # (request, tools that would serve it)
    ("Show me what is in setup.py.", {"Read"}),
    ("Run the test suite with pytest.", {"Bash"}),
    ("Find every TODO comment in the project.", {"Grep"}),
    ("List all Python files under src/.", {"Glob", "LS", "Bash"}),
    ("Create a file hello.py that prints 'hello world'.", {"Write"}),
    ("Read lines 10 to 30 of app/main.py.", {"Read"}),
    ("What files are in the current directory?", {"LS", "Glob", "Bash"}),
    ("Show me the git log of the last 5 commits.", {"Bash"}),
    ("Where is the class Config defined?", {"Grep"}),
    ("In settings.py, change DEBUG = True to DEBUG = False.", {"Edit", "Read"}),
    ("Install the requests package with pip.", {"Bash"}),
    ("Show me the function parse_args in cli.py.", {"Grep", "Read"}),
    ("Search the .js files for calls to fetch(.", {"Grep"}),
    ("Delete the build/ directory.", {"Bash"}),
]
FORCED_PROMPT = "Create fib.py with a function fib(n) that returns the n-th Fibonacci number, and a main that prints fib(1..20)."


@dataclass
class Tally:
    replies: int = 0
    tagged: int = 0  # replies with at least one <tool_call> token
    bare: int = 0  # replies whose call was recovered from untagged JSON
    text: int = 0  # replies without any call and no attempt at one
    calls: int = 0
    cut: int = 0  # calls cut off by max_tokens (not counted as malformed)
    right_tool: int = 0  # replies whose first call names a tool that serves the request
    malformed: dict[str, int] = field(default_factory=dict)  # kind -> count
    tokens: int = 0
    decode_tps: list[float] = field(default_factory=list)

    def bad(self, kind: str) -> None:
        self.malformed[kind] = self.malformed.get(kind, 0) + 1

    @property
    def n_malformed(self) -> int:
        return sum(self.malformed.values())


def check_call(call: ToolCall, params: dict[str, dict]) -> str | None:
    """Why a call is malformed, or None when it is valid for one of the offered tools."""
    if call.error:
        return "bad JSON" if "JSON" in call.error else "not an object"
    if call.name not in params:
        return "unknown tool"
    try:
        jsonschema.validate(call.arguments, params[call.name])
    except jsonschema.ValidationError:
        return "schema violation"
    return None


def untagged_attempt(text: str) -> str | None:
    """Why an untagged reply that looks like a call (fence or brace first, a "name" key) yielded none."""
    body = text.strip()
    if not (body.startswith(("{", "```")) and '"name"' in body):
        return None
    call = parse_call_json(body)
    if call.error:
        return "bad JSON" if "JSON" in call.error else "not an object"
    return "unknown tool"  # the parser's fallback keeps every parsable call with a known name


def run_prompt(engine: LocalEngine, tools: list[dict], user: str, expected: set[str], sampling: Sampling,
               constrained: bool, tally: Tally, show: bool) -> None:
    messages = [{"role": "system", "content": system_prompt()}, {"role": "user", "content": user}]
    events = list(engine.stream(Request("bench", messages, tools, sampling, constrained_tools=constrained)))
    done = events[-1]
    assert isinstance(done, Done), done
    if done.stop_reason == "error":
        raise SystemExit(f"error: generation failed: {done.error}")
    start = done.usage.prompt_tokens  # the session's tokens also hold end-of-turn glue after the reply
    generated = engine.session_tokens("bench")[start:start + done.usage.generated_tokens]
    reply = engine.tokenizer.decode(generated)
    cut = done.stop_reason == "max_tokens"
    calls = [e for e in events if isinstance(e, ToolCall)]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    params = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    tally.replies += 1
    tally.tokens += done.usage.generated_tokens
    if done.usage.decode_tps:
        tally.decode_tps.append(done.usage.decode_tps)
    if engine.tokenizer.tool_call_start_id in generated:
        tally.tagged += 1
    elif calls:
        tally.bare += 1
    elif cut and reply.lstrip().startswith(("{", "```")):
        tally.cut += 1
    elif "<tool_call>" in reply:
        tally.bad("tag written as text")
    elif why := untagged_attempt(text):
        tally.bad(why)
    else:
        tally.text += 1
    if calls and calls[0].name in expected:
        tally.right_tool += 1
    for call in calls:
        tally.calls += 1
        why = check_call(call, params)
        if why and cut and call is calls[-1] and call.error:
            tally.cut += 1  # the token limit, not the model or the mask, ended it
        elif why:
            tally.bad(why)
    if show:
        mode = "on " if constrained else "off"
        print(f"  [{mode} {sampling.seed}] {user!r} -> {reply!r}", flush=True)


def validity(engine: LocalEngine, tools: list[dict], prompts: list[tuple[str, set[str]]], seeds: list[int | None], max_tokens: int,
             show: bool) -> dict[bool, Tally]:
    tallies = {False: Tally(), True: Tally()}
    for seed in seeds:
        sampling = Sampling(max_tokens=max_tokens) if seed is None else \
            Sampling(temperature=0.7, top_p=0.95, seed=seed, max_tokens=max_tokens)
        for user, expected in prompts:
            for constrained in (False, True):
                run_prompt(engine, tools, user, expected, sampling, constrained, tallies[constrained], show)
    return tallies


def in_worker(fn):
    """Run fn() in a fresh thread, as LocalEngine runs generation (decode speed differs from the main thread's)."""
    result: list = []
    worker = threading.Thread(target=lambda: result.append(fn()))
    worker.start()
    worker.join()
    return result[0]


def mask_cost(engine: LocalEngine, tools: list[dict], n: int, reps: int) -> dict:
    """Greedy decode of a forced call (a Write request) with the mask off and on, alternating; medians."""
    tok = engine.tokenizer
    messages = [{"role": "system", "content": system_prompt()}, {"role": "user", "content": FORCED_PROMPT}]
    prompt = engine.builder.render_tokens(messages, tools) + [tok.tool_call_start_id]
    cache = KVCache(engine.model.config, model_id=engine.model_id)
    in_worker(lambda: list(generate(engine.model, cache, prompt, Sampling(max_tokens=1))))  # prefill once, reused
    tps: dict[bool, list[float]] = {False: [], True: []}
    per_token, texts = [], {}
    for rep in range(reps + 1):  # the first round is a warm-up
        for on in (False, True):
            c = engine.grammars.constraint(tools) if on else None
            if c:
                c.accept(tok.tool_call_start_id)
            gen = generate(engine.model, cache, prompt, Sampling(max_tokens=n), stop_ids=(), processor=c)
            out = in_worker(lambda: list(gen))
            texts[on] = tok.decode(out)
            if rep:
                tps[on].append(gen.usage.decode_tps)
                if c:
                    per_token.append(c.mask_seconds / max(c.masked_steps, 1))
    return {"off_tps": statistics.median(tps[False]), "on_tps": statistics.median(tps[True]),
            "mask_ms": 1000 * statistics.median(per_token), "texts": texts, "reps": reps, "n": n}


def compile_times(engine: LocalEngine, tools: list[dict]) -> dict:
    """Seconds: first compile in a process (xgrammar import, tokenizer info, 3 grammars), another tool list, a hit."""
    fresh = ToolGrammars(engine.tokenizer, engine.model.config.vocab_size)
    t0 = time.perf_counter()
    compiled = fresh.prepare(tools).result()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    fresh.prepare(tools[:-1]).result()
    other = time.perf_counter() - t0
    t0 = time.perf_counter()
    fresh.prepare(list(tools)).result()
    return {"first": first, "other": other, "hit": time.perf_counter() - t0, "loose": compiled.loose}


def report(tallies: dict[bool, Tally], cost: dict, compile_s: dict) -> None:
    print("| mask | replies | tagged | bare | text only | calls | cut by max_tokens | malformed | kinds | right tool "
          "| decode tok/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for on in (False, True):
        t = tallies[on]
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(t.malformed.items())) or "-"
        tps = f"{statistics.median(t.decode_tps):.1f}" if t.decode_tps else "-"
        print(f"| {'on' if on else 'off'} | {t.replies} | {t.tagged} | {t.bare} | {t.text} | {t.calls} | {t.cut} | "
              f"{t.n_malformed} | {kinds} | {t.right_tool} | {tps} |")
    print()
    ratio = cost["on_tps"] / cost["off_tps"]
    print("| figure | mask off | mask on | on/off |")
    print("|---|---|---|---|")
    print(f"| forced call (a Write request), decode tok/s | {cost['off_tps']:.2f} | {cost['on_tps']:.2f} | {ratio:.2f} |")
    step_ms = 1000 / cost["off_tps"]
    print(f"| mask time per masked token (fill + apply + advance) | - | {cost['mask_ms']:.2f} ms | "
          f"{cost['mask_ms'] / step_ms:.1%} of a {step_ms:.0f} ms step |")
    print(f"| first compile in a process (xgrammar import, tokenizer info, built-in tools) | - | "
          f"{1000 * compile_s['first']:.0f} ms | - |")
    print(f"| compile of another tool list | - | {1000 * compile_s['other']:.0f} ms | - |")
    print(f"| lookup of a compiled tool list | - | {1000 * compile_s['hit']:.2f} ms | - |")
    if compile_s["loose"]:
        print("- note: the tool schemas did not compile; the loose (names-only) grammar was used")


def machine() -> str:
    return f"{platform.machine()} {platform.processor() or ''} {torch.get_num_threads()} threads".strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="greedy only, first 5 prompts, fewer reps")
    ap.add_argument("--show", action="store_true", help="print every reply")
    ap.add_argument("--model", default=None, help="registered model name or GGUF path (default: the bundled default, the 1.5B)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--all-tools", action="store_true", help="offer every built-in tool, not the agent's set for this model")
    ap.add_argument("--max-tokens", type=int, default=256)
    args = ap.parse_args(argv)
    prompts, seeds, reps = (PROMPTS[:5], [None], 2) if args.quick else (PROMPTS, [None, 1, 2], 5)
    print(f"# bench/toolcalls.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"date: {datetime.datetime.now().isoformat(timespec='seconds')}")
    t0 = time.perf_counter()
    try:
        engine = LocalEngine.from_spec(args.model, RuntimeOptions.from_env(os.environ), threads=args.threads)
    except (ModelError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"model {engine.name}; torch {torch.__version__}; {machine()}; load {time.perf_counter() - t0:.1f} s")
    offered = builtin_tools() if args.all_tools else tools_for_profile(builtin_tools(), choose_profile(model_parameters(engine)), "default")
    tools = [schema_for_engine(t) for t in offered]
    print(f"tools offered: {', '.join(t.name for t in offered)}")
    compile_s = compile_times(engine, tools)
    cost = mask_cost(engine, tools, n=48, reps=reps)
    if args.show:
        for on, text in cost["texts"].items():
            print(f"  forced call, mask {'on' if on else 'off'}: {text!r}")
    tallies = validity(engine, tools, prompts, seeds, args.max_tokens, args.show)
    print()
    report(tallies, cost, compile_s)
    print(f"\n- forced call: {cost['n']} tokens, greedy, median of {cost['reps']} alternating runs after a warm-up")
    print(f"- {len(prompts)} prompts x {len(seeds)} runs (greedy{', T=0.7 top_p=0.95 seeds 1,2' if len(seeds) > 1 else ''})"
          f" x mask off/on; max {args.max_tokens} tokens per reply")
    print(f"- wall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
