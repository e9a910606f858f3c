"""Constrained tool calls on the real model: call validity with and without the mask, and the mask's cost.

    python bench/toolcalls.py              # greedy + 2 sampled runs per prompt, both modes (~15 min on 2 cores)
    python bench/toolcalls.py --quick      # greedy only, first 5 prompts
    python bench/toolcalls.py --show       # also print every reply

Workload: the agent's own system prompt (agent.context.system_prompt) and built-in tool schemas
(tools.builtin_tools via tools.base.schema_for_engine), plus one short user request that needs a
tool. Every prompt runs through LocalEngine.stream with Request.constrained_tools off and on, the
two modes alternating per prompt, in one session (the system prefix is prefilled once).

Figures:
  validity   each reply is a tagged call, a bare call (untagged JSON the parser's fallback kept), an
             attempted call nothing could parse (a reply starting with ``` or { that names a tool:
             counted malformed), or text. Every call is checked: parser error (bad JSON, arguments
             not an object), unknown tool, arguments violating the tool's schema (jsonschema).
  mask cost  a Write call forced open (prompt + <tool_call>), greedy, N tokens, stop tokens off:
             decode tokens/s with the mask off and on (alternating, median of reps after a warm-up)
             and the mask's own time per masked token (fill + apply + advance).
  compile    first compile of the tool list (tokenizer info included) and a cached lookup.
"""
from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

# Run as a script, this file's folder is first on sys.path and its name would shadow the runtime package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import jsonschema  # noqa: E402

from agent.context import system_prompt  # noqa: E402
from runtime.api import Done, Request, Sampling, TextDelta, ToolCall  # noqa: E402
from runtime.constrain import ToolGrammars  # noqa: E402
from runtime.engine import LocalEngine  # noqa: E402
from runtime.generate import generate  # noqa: E402
from runtime.kv_cache import KVCache  # noqa: E402
from runtime.models import ModelError  # noqa: E402
from tools import builtin_tools  # noqa: E402
from tools.base import schema_for_engine  # noqa: E402

PROMPTS = [
    "Show me what is in setup.py.",
    "Run the test suite with pytest.",
    "Find every TODO comment in the project.",
    "List all Python files under src/.",
    "Create a file hello.py that prints 'hello world'.",
    "Read lines 10 to 30 of app/main.py.",
    "What files are in the current directory?",
    "Show me the git log of the last 5 commits.",
    "Where is the class Config defined?",
    "In settings.py, change DEBUG = True to DEBUG = False.",
    "Install the requests package with pip.",
    "Make a todo list for adding a login page: design the form, add the route, write tests.",
    "Search the .js files for calls to fetch(.",
    "Delete the build/ directory.",
]
FORCED_PROMPT = "Create fib.py with a function fib(n) that returns the n-th Fibonacci number, and a main that prints fib(1..20)."


@dataclass
class Tally:
    replies: int = 0
    tagged: int = 0  # replies with at least one <tool_call>
    bare: int = 0  # replies whose call was recovered from untagged JSON
    text: int = 0  # replies without any call
    calls: int = 0
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


def attempted_call(text: str, names: set[str]) -> bool:
    """A reply that looks like an untagged call (fence or brace first, a tool named in it)."""
    body = text.strip()
    return body.startswith(("{", "```")) and '"name"' in body and any(f'"{n}"' in body for n in names)


def run_prompt(engine: LocalEngine, tools: list[dict], user: str, sampling: Sampling, constrained: bool,
               tally: Tally, show: bool) -> None:
    messages = [{"role": "system", "content": system_prompt()}, {"role": "user", "content": user}]
    events = list(engine.stream(Request("bench", messages, tools, sampling, constrained_tools=constrained)))
    done = events[-1]
    assert isinstance(done, Done), done
    if done.stop_reason == "error":
        raise SystemExit(f"error: generation failed: {done.error}")
    reply = engine.tokenizer.decode(engine.session_tokens("bench")[done.usage.prompt_tokens:])
    calls = [e for e in events if isinstance(e, ToolCall)]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    params = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    tally.replies += 1
    tally.tokens += done.usage.generated_tokens
    if done.usage.decode_tps:
        tally.decode_tps.append(done.usage.decode_tps)
    if "<tool_call>" in reply:
        tally.tagged += 1
    elif calls:
        tally.bare += 1
    elif attempted_call(text, set(params)):
        tally.bad("untagged, unparsable")
    else:
        tally.text += 1
    for call in calls:
        tally.calls += 1
        why = check_call(call, params)
        if why:
            tally.bad(why)
    if show:
        mode = "on " if constrained else "off"
        print(f"  [{mode} {sampling.seed}] {user!r} -> {reply!r}", flush=True)


def validity(engine: LocalEngine, tools: list[dict], prompts: list[str], seeds: list[int | None], max_tokens: int,
             show: bool) -> dict[bool, Tally]:
    tallies = {False: Tally(), True: Tally()}
    for seed in seeds:
        sampling = Sampling(max_tokens=max_tokens) if seed is None else \
            Sampling(temperature=0.7, top_p=0.95, seed=seed, max_tokens=max_tokens)
        for user in prompts:
            for constrained in (False, True):
                run_prompt(engine, tools, user, sampling, constrained, tallies[constrained], show)
    return tallies


def mask_cost(engine: LocalEngine, tools: list[dict], n: int, reps: int) -> dict:
    """Greedy decode of a forced Write call with the mask off and on, alternating; medians."""
    tok = engine.tokenizer
    messages = [{"role": "system", "content": system_prompt()}, {"role": "user", "content": FORCED_PROMPT}]
    prompt = engine.builder.render_tokens(messages, tools) + [tok.tool_call_start_id]
    cache = KVCache(engine.model.config, model_id=engine.model_id)
    list(generate(engine.model, cache, prompt, Sampling(max_tokens=1)))  # prefill once; later runs reuse it
    tps: dict[bool, list[float]] = {False: [], True: []}
    per_token, texts = [], {}
    for rep in range(reps + 1):  # the first round is a warm-up
        for on in (False, True):
            c = engine.grammars.constraint(tools) if on else None
            if c:
                c.accept(tok.tool_call_start_id)
            gen = generate(engine.model, cache, prompt, Sampling(max_tokens=n), stop_ids=(), processor=c)
            out = list(gen)
            texts[on] = tok.decode(out)
            if rep:
                tps[on].append(gen.usage.decode_tps)
                if c:
                    per_token.append(c.mask_seconds / max(c.masked_steps, 1))
    return {"off_tps": statistics.median(tps[False]), "on_tps": statistics.median(tps[True]),
            "mask_ms": 1000 * statistics.median(per_token), "texts": texts}


def compile_times(engine: LocalEngine, tools: list[dict]) -> tuple[float, float, bool]:
    fresh = ToolGrammars(engine.tokenizer, engine.model.config.vocab_size)
    t0 = time.perf_counter()
    compiled = fresh.prepare(tools).result()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    fresh.prepare(list(tools)).result()
    return first, time.perf_counter() - t0, compiled.loose


def report(tallies: dict[bool, Tally], cost: dict, compile_s: tuple[float, float, bool]) -> None:
    print("| mask | replies | tagged calls | bare calls | text only | calls | malformed | kinds | decode tok/s (median) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for on in (False, True):
        t = tallies[on]
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(t.malformed.items())) or "-"
        tps = f"{statistics.median(t.decode_tps):.1f}" if t.decode_tps else "-"
        print(f"| {'on' if on else 'off'} | {t.replies} | {t.tagged} | {t.bare} | {t.text} | {t.calls} | "
              f"{t.n_malformed} | {kinds} | {tps} |")
    print()
    ratio = cost["on_tps"] / cost["off_tps"]
    print("| figure | mask off | mask on | on/off |")
    print("|---|---|---|---|")
    print(f"| forced Write call, decode tok/s | {cost['off_tps']:.2f} | {cost['on_tps']:.2f} | {ratio:.2f} |")
    print(f"| mask time per masked token | - | {cost['mask_ms']:.2f} ms | - |")
    first, cached, loose = compile_s
    print(f"| grammar compile, built-in tools (first, incl. tokenizer info) | - | {1000 * first:.0f} ms | - |")
    print(f"| grammar lookup, same tools again | - | {1000 * cached:.2f} ms | - |")
    if loose:
        print("- note: the tool schemas did not compile; the loose (names-only) grammar was used")


def machine() -> str:
    return f"{platform.machine()} {platform.processor() or ''} {torch.get_num_threads()} threads".strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="greedy only, first 5 prompts, fewer reps")
    ap.add_argument("--show", action="store_true", help="print every reply")
    ap.add_argument("--model", default=None, help="registered model name or GGUF path (default: the bundled 0.5B)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=160)
    args = ap.parse_args(argv)
    prompts, seeds, reps = (PROMPTS[:5], [None], 2) if args.quick else (PROMPTS, [None, 1, 2], 3)
    print(f"# bench/toolcalls.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"date: {datetime.datetime.now().isoformat(timespec='seconds')}")
    t0 = time.perf_counter()
    try:
        engine = LocalEngine.from_spec(args.model, threads=args.threads)
    except ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"model {engine.name}; torch {torch.__version__}; {machine()}; load {time.perf_counter() - t0:.1f} s")
    tools = [schema_for_engine(t) for t in builtin_tools()]
    compile_s = compile_times(engine, tools)
    cost = mask_cost(engine, tools, n=48 if args.quick else 64, reps=reps)
    if args.show:
        for on, text in cost["texts"].items():
            print(f"  forced call, mask {'on' if on else 'off'}: {text!r}")
    tallies = validity(engine, tools, prompts, seeds, args.max_tokens, args.show)
    print()
    report(tallies, cost, compile_s)
    print(f"\n- {len(prompts)} prompts x {len(seeds)} runs (greedy{', T=0.7 top_p=0.95 seeds 1,2' if len(seeds) > 1 else ''})"
          f" x mask off/on; max {args.max_tokens} tokens per reply")
    print(f"- wall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
