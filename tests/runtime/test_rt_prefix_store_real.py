"""Warm start from the prefix store on the real 0.5B model: a second engine's first turn prefills only
the user's text and starts the same greedy reply as a cold prefill.

Only the start is compared: the cold engine computes the user's text inside its last prefill chunk (SDPA attention
over ~70 rows), the warm one alone (the kernel's attention over ~14 rows), and with activations rounded to 8-bit
blocks that fp32 noise can turn into a different token at a near-tie a few tokens on (it did at token 3)."""
import pytest

from runtime.api import Done, Request, Sampling
from runtime.engine import LocalEngine
from runtime.options import RuntimeOptions
from runtime.prefix_store import PrefixStore, store_fingerprint

SYSTEM = ("You are a coding agent in the user's project. You act only through tool calls. "
          + " ".join(f"Rule {i}: read a file before you edit it, and run the tests after each change to module {i}."
                     for i in range(16)))
TOOLS = [{"type": "function", "function": {"name": "Read", "description": "Read a file from the project.",
                                          "parameters": {"type": "object", "properties": {"file_path": {"type": "string"}},
                                                         "required": ["file_path"]}}}]


def first_turn(engine: LocalEngine, user: str):
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "<env>\nPlatform: linux\n</env>\n\n" + user}]
    events = list(engine.stream(Request("s", msgs, TOOLS, Sampling(max_tokens=12))))
    engine.wait_for_prefix_store()
    done = events[-1]
    assert isinstance(done, Done) and done.error is None, done
    return engine.session_tokens("s")[done.usage.prompt_tokens:], done.usage


@pytest.mark.slow
def test_real_model_warm_start_prefills_only_the_user_text(small_gguf_path, tmp_path):
    cold_engine = LocalEngine.from_spec(None, RuntimeOptions(threads=2), prefix_dir=tmp_path / "prefix")
    _, u1 = first_turn(cold_engine, "Where is the main entry point?")
    assert u1.reused_tokens == 0 and len(list((tmp_path / "prefix").glob("*/*.kv"))) == 1

    def engine_like(store: PrefixStore | None) -> LocalEngine:  # a new process, without reloading the weights
        e = cold_engine
        return LocalEngine(e.model, e.tokenizer, e.builder.template, name=e.name, model_id=e.model_id, prefix_store=store)

    store = PrefixStore(tmp_path / "prefix", cold_engine.model_id, cold_engine.model.config,
                        fingerprint=store_fingerprint(cold_engine.model))
    user = "List the test files."
    warm_tokens, warm = first_turn(engine_like(store), user)
    cold_tokens, cold = first_turn(engine_like(None), user)
    user_tokens = len(cold_engine.tokenizer.encode(user))
    assert cold.reused_tokens == 0 and warm.prompt_tokens == cold.prompt_tokens > 300
    assert warm.prefilled_tokens <= user_tokens + 8  # the user's text and the template's glue
    assert warm_tokens[:2] == cold_tokens[:2] and len(warm_tokens) == len(cold_tokens)
    assert warm.ttft_s < cold.ttft_s
