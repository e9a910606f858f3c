"""LocalEngine.sample: N candidate replies of one prompt decoded together, on the tiny random-weight model."""
import threading

import pytest

from runtime.api import Request, Sampling, TextDelta
from runtime.engine import LocalEngine
from runtime.options import RuntimeOptions


@pytest.fixture(scope="module")
def engine(tiny_gguf_path, tmp_path_factory):
    return LocalEngine.from_spec(str(tiny_gguf_path), RuntimeOptions(threads=2), cache_dir=tmp_path_factory.mktemp("c"))


MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "write the file"}]


def streamed(engine, request):
    return "".join(e.text for e in engine.stream(request) if isinstance(e, TextDelta))


def test_greedy_candidates_are_the_streamed_reply_and_the_session_keeps_only_the_prompt(engine):
    request = Request("a", MESSAGES, sampling=Sampling(max_tokens=12))
    candidates, usage = engine.sample(request, 3)
    alone = streamed(engine, Request("b", MESSAGES, sampling=Sampling(max_tokens=12)))
    assert [c.text for c in candidates] == [alone] * 3
    assert usage.generated_tokens == sum(c.tokens for c in candidates) and usage.prompt_tokens > 0
    # The next call on the session reuses the prompt's K/V: only the new message is prefilled.
    follow = [*MESSAGES, {"role": "assistant", "content": "done"}, {"role": "user", "content": "more"}]
    done = [e for e in engine.stream(Request("a", follow, sampling=Sampling(max_tokens=2)))][-1]
    assert done.usage.reused_tokens >= usage.prompt_tokens - 1


def test_sampled_candidates_follow_their_seeds_and_stop_strings_end_them(engine):
    sampling = Sampling(temperature=50.0, seed=7, max_tokens=16)  # the random model is peaked: flatten it
    first, _ = engine.sample(Request("c", MESSAGES, sampling=sampling), 3)
    again, usage = engine.sample(Request("d", MESSAGES, sampling=sampling), 2)  # two branches: decoded, not recalled
    assert usage.generated_tokens > 0
    assert [c.text for c in first[:2]] == [c.text for c in again] and len({c.text for c in first}) > 1
    stop = first[0].text[2:4]
    assert stop, first[0].text
    stopped, _ = engine.sample(Request("e", MESSAGES, sampling=sampling, stop=[stop]), 1)
    assert stop in stopped[0].text and len(stopped[0].text) <= first[0].text.index(stop) + 2 + len(stop) + 8


def test_greedy_first_branches_are_the_greedy_reply_beside_sampled_ones(engine):
    hot = Sampling(temperature=50.0, seed=7, max_tokens=12)
    mixed, _ = engine.sample(Request("f", MESSAGES, sampling=hot), 3, greedy=1)
    sampled, _ = engine.sample(Request("g", MESSAGES, sampling=hot), 3)
    greedy = streamed(engine, Request("h", MESSAGES, sampling=Sampling(max_tokens=12)))
    assert mixed[0].text == greedy != sampled[0].text
    assert [c.text for c in mixed[1:]] == [c.text for c in sampled[1:]]  # the other branches keep their seeds


def test_a_repeated_request_gets_its_candidates_again_without_decoding(engine):
    sampling = Sampling(temperature=50.0, seed=11, max_tokens=10)
    first, used = engine.sample(Request("m", MESSAGES, sampling=sampling), 2)
    again, usage = engine.sample(Request("n", MESSAGES, sampling=sampling), 2)  # another session, the same prompt
    assert used.generated_tokens > 0 and usage.generated_tokens == 0 and usage.reused_tokens == usage.prompt_tokens
    assert [(c.text, c.tokens, c.mean_logprob) for c in again] == [(c.text, c.tokens, c.mean_logprob) for c in first]
    other, usage = engine.sample(Request("m", MESSAGES, sampling=Sampling(temperature=50.0, seed=12, max_tokens=10)), 2)
    assert usage.generated_tokens > 0 and other[0].text == first[1].text  # branch 0 of seed 12 is branch 1 of seed 11


def test_a_cancelled_sample_is_not_recalled(engine):
    sampling = Sampling(temperature=50.0, seed=21, max_tokens=10)
    stopped = threading.Event()
    stopped.set()
    cut, _ = engine.sample(Request("p", MESSAGES, sampling=sampling), 2, cancel=stopped)
    assert {c.finish_reason for c in cut} == {"cancelled"}
    whole, usage = engine.sample(Request("q", MESSAGES, sampling=sampling), 2)
    assert usage.generated_tokens > 0 and {c.finish_reason for c in whole} != {"cancelled"}
