"""`python -m runtime` / `agent chat`: talk to the model without the agent, streaming tokens as they come."""
from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import uuid

from runtime.api import Done, Progress, Request, Sampling, TextDelta, ToolCall
from runtime.models import ModelError
from runtime.process_end import run_and_exit


def _progress(p: Progress) -> None:
    pct = 100 * p.done // max(p.total, 1)
    end = "\n" if p.done >= p.total else ""
    print(f"\r[{p.what}] {pct:3d}% ({p.done}/{p.total})", end=end, file=sys.stderr, flush=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not argparse's usage block
        self.exit(2, f"{self.prog}: {message} ({self.prog} --help lists the flags)\n")


def _number(kind: type, low: float, high: float, *, low_open: bool = False):
    """An argparse type: a finite `kind` in [low, high] (or (low, high]); otherwise argparse's one-line error."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or not (low < value if low_open else low <= value) \
                or value > high:
            bound = f"above {low}" if low_open else f"from {low}"
            raise argparse.ArgumentTypeError(f"{text!r} is not {'a whole number' if kind is int else 'a number'} "
                                             f"{bound} to {high}")
        return value
    return parse


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(prog="agent chat", description="Chat with the in-process model (no tools, no agent).")
    ap.add_argument("--model", default=None, help="registry name (qwen2.5-coder-0.5b, qwen2.5-coder-1.5b) or a GGUF path")
    ap.add_argument("--system", default=None, help="system prompt")
    ap.add_argument("--temperature", type=_number(float, 0, 100), default=0.0)
    ap.add_argument("--top-p", type=_number(float, 0, 1, low_open=True), default=1.0)
    ap.add_argument("--top-k", type=_number(int, 0, 1 << 20), default=0)
    ap.add_argument("--seed", type=_number(int, 0, 2**63 - 1), default=None)
    ap.add_argument("--max-tokens", type=_number(int, 1, 1 << 20), default=1024)
    ap.add_argument("--threads", type=_number(int, 1, 1024), default=None)
    ap.add_argument("-p", "--prompt", default=None, help="one prompt, answer, exit")
    ap.add_argument("--stats", action="store_true", help="print usage after each reply")
    args = ap.parse_args(argv)

    from runtime.engine import LocalEngine  # torch import is slow: after argument errors
    from runtime.options import RuntimeOptions
    try:
        options = RuntimeOptions.from_env(os.environ)
        engine = LocalEngine.from_spec(args.model, options, threads=args.threads, progress=_progress)
    except (ModelError, OSError, ValueError) as e:
        print(f"agent chat: {e}", file=sys.stderr)
        return 1
    where = "converted cache" if engine.loaded_from_cache else "GGUF (converted now; later loads are fast)"
    print(f"{engine.name} loaded from {where} in {engine.load_seconds:.1f}s. Ctrl-C stops a reply; Ctrl-D quits.",
          file=sys.stderr)
    sampling = Sampling(args.temperature, args.top_p, args.top_k, args.seed, args.max_tokens)
    messages: list[dict] = [{"role": "system", "content": args.system}] if args.system else []
    session = uuid.uuid4().hex
    while True:
        if args.prompt is not None:
            prompt = args.prompt
        else:
            try:
                prompt = input("> ")
            except (EOFError, KeyboardInterrupt):
                print(file=sys.stderr)
                return 0
            if not prompt.strip():
                continue
        messages.append({"role": "user", "content": prompt})
        reply = _reply(engine, Request(session, messages, [], sampling), args.stats)
        messages.append({"role": "assistant", "content": reply})
        if args.prompt is not None:
            return 0


def _reply(engine, request: Request, stats: bool) -> str:
    cancel = threading.Event()
    text: list[str] = []
    events = engine.stream(request, cancel=cancel)
    try:
        for event in events:
            if isinstance(event, TextDelta):
                text.append(event.text)
                print(event.text, end="", flush=True)
            elif isinstance(event, ToolCall):
                text.append(event.raw)
                print(event.raw, end="", flush=True)
            elif isinstance(event, Progress):
                _progress(event)
            elif isinstance(event, Done):
                print()
                if event.error:
                    print(f"[{event.stop_reason}] {event.error}", file=sys.stderr)
                if stats:
                    u = event.usage
                    print(f"[prompt {u.prompt_tokens} (reused {u.reused_tokens}, prefilled {u.prefilled_tokens}) "
                          f"generated {u.generated_tokens}; TTFT {u.ttft_s:.2f}s, prefill {u.prefill_tps:.1f} tok/s, "
                          f"decode {u.decode_tps:.1f} tok/s; {event.stop_reason}]", file=sys.stderr)
    except KeyboardInterrupt:
        cancel.set()
        events.close()  # waits for the worker: the KV cache is consistent before the next prompt
        print("\n[interrupted]", file=sys.stderr)
    return "".join(text)


if __name__ == "__main__":
    run_and_exit(main)
