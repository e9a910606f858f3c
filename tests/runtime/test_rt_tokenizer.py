"""runtime.tokenizer against the `tokenizers` library built from the same GGUF vocabulary."""
from __future__ import annotations

import re
import sysconfig
import time
from dataclasses import replace
from pathlib import Path

import pytest
from tokenizers import Regex, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

from runtime.gguf_loader import TokenizerData
from runtime.models import ModelError
from runtime.tokenizer import QWEN2_PATTERN, Tokenizer, gpt2_byte_decoder

SAMPLES = [
    "def add(a, b):\n    return a + b\n",
    "if x:\r\n\tprint('tab\\tand CRLF')\r\n",
    "    \n\n   trailing spaces   \n\n\n",
    "I'LL be there, don't worry; it's 12345678 o'clock.",
    "中文编码测试：你好，世界！这是一个测试。",
    "日本語のテキスト、カタカナとひらがな。",
    "한국어 텍스트입니다.",
    "Русский текст, ёжик.  Ελληνικά κείμενα.",
    "النص العربي يكتب من اليمين",
    "हिन्दी पाठ परीक्षण",
    "emoji 🎉🦩👩🏽‍💻🇩🇪 ❤️ ok",
    "combining e\u0301 vs \u00e9, NBSP\u00a0here, zero\u200bwidth",
    "math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ∀x∈ℝ: x² ≥ 0",
    "",
    " ",
    "<|im_start|>system\nnot a turn<|im_end|> <tool_call>{}</tool_call> <|endoftext|>",
]


@pytest.fixture(scope="module")
def tok(small_model_info) -> Tokenizer:
    return Tokenizer.from_gguf_data(small_model_info.tokenizer_data)


@pytest.fixture(scope="module")
def reference(small_model_info) -> HFTokenizer:
    """Hugging Face's BPE with the Qwen2 tokenizer.json pre-tokenizer, from the GGUF vocabulary and merges."""
    data = small_model_info.tokenizer_data
    vocab = {t: i for i, (t, kind) in enumerate(zip(data.tokens, data.token_types)) if kind == 1}
    merges = [tuple(m.split(" ")) for m in data.merges]
    hf = HFTokenizer(models.BPE(vocab, merges, ignore_merges=False))
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    hf.decoder = decoders.ByteLevel()
    return hf


def test_samples_match_reference_and_round_trip(tok, reference):
    for text in SAMPLES:
        ids = tok.encode(text)
        assert ids == reference.encode(text, add_special_tokens=False).ids, text
        assert tok.decode(ids) == text


def test_special_token_text_stays_ordinary(tok):
    ids = tok.encode("<|im_start|>user")
    assert tok.im_start_id not in ids and tok.decode(ids) == "<|im_start|>user"
    assert all(not tok.is_special(i) for text in SAMPLES for i in tok.encode(text))
    assert tok.encode_with_specials("<|im_start|>user\nhi<|im_end|>\n") == [
        tok.im_start_id, *tok.encode("user\nhi"), tok.im_end_id, *tok.encode("\n")]
    assert tok.encode_with_specials("<tool_call>") == [tok.tool_call_start_id]


def test_ids_of_the_default_vocabulary(tok):
    assert (tok.vocab_size, tok.im_start_id, tok.im_end_id, tok.eos_id, tok.bos_id, tok.pad_id) == \
        (151936, 151644, 151645, 151645, 151643, 151643)
    assert (tok.tool_call_start_id, tok.tool_call_end_id) == (151657, 151658)
    assert tok.stop_ids == {151643, 151645}
    assert tok.decode([151644, 151657]) == "<|im_start|><tool_call>"
    assert tok.decode([151935]) == "[PAD151935]"  # unused ids still decode


def test_incremental_decoder_never_splits_a_character(tok):
    text = "𝔘𝔫𝔦 🦩 ok 中文 👩🏽‍💻"
    ids = tok.encode(text)
    assert any(_is_partial_utf8(tok.token_bytes(i)) for i in ids)  # the case under test occurs
    decoder = tok.decoder()
    deltas = [decoder.feed(i) for i in ids]
    assert "".join(deltas) + decoder.flush() == text
    assert "" in deltas and not any("\ufffd" in d for d in deltas)


def test_incremental_decoder_replaces_a_dangling_partial_character(tok):
    ids = tok.encode("🦩")
    decoder = tok.decoder()
    assert [decoder.feed(i) for i in ids[:-1]] == [""] * (len(ids) - 1)
    assert decoder.flush() == "\ufffd"


def _byte_vocab(**changes) -> TokenizerData:
    by_byte = {b: c for c, b in gpt2_byte_decoder().items()}
    tokens = [by_byte[b] for b in range(256)] + ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    data = TokenizerData(model="gpt2", pre="qwen2", tokens=tokens, token_types=[1] * 256 + [3, 3, 3], merges=[],
                         bos_id=256, eos_id=258, pad_id=256)
    return replace(data, **changes)


def test_byte_vocabulary_without_merges():
    tok = Tokenizer.from_gguf_data(_byte_vocab())
    assert tok.encode("hi é") == [104, 105, 32, 0xC3, 0xA9]
    assert tok.encode_with_specials("<|im_start|>a<|im_end|>") == [257, 97, 258]
    assert (tok.im_start_id, tok.im_end_id, tok.tool_call_start_id, tok.stop_ids) == (257, 258, None, {256, 258})


def test_unsupported_vocabularies_fail_clearly():
    with pytest.raises(ModelError, match=r"^pre-tokenizer 'falcon' is not supported; supported are qwen2, llama-bpe$"):
        Tokenizer.from_gguf_data(_byte_vocab(pre="falcon"))
    with pytest.raises(ModelError, match=r"^tokenizer model 'llama' is not supported"):
        Tokenizer.from_gguf_data(_byte_vocab(model="llama"))
    data = _byte_vocab()
    tokens = data.tokens[:256] + ["ab", "Ġa"] + data.tokens[256:]
    merges = ["Ġ a", "a b"]  # merge 0 must create id 256 ("Ġa"), but "ab" has it
    with pytest.raises(ModelError, match=r"^merge 0 \('Ġ a'\) does not create token 256"):
        Tokenizer.from_gguf_data(replace(data, tokens=tokens, token_types=[1] * 258 + [3, 3, 3], merges=merges))
    for raw in ("a b", "x\x7f", "\u0100\u2603"):  # a plain space, DEL and a non-latin-1 character are not stand-ins
        with pytest.raises(ModelError, match="^" + re.escape(f"token 256 {raw!r} is not GPT-2 byte-encoded")):
            Tokenizer.from_gguf_data(replace(data, tokens=data.tokens[:256] + [raw] + data.tokens[256:],
                                             token_types=[1] * 257 + [3, 3, 3]))


def test_merges_in_order_give_their_tokens():
    data = _byte_vocab()
    tokens = data.tokens[:256] + ["Ġa", "Ġab"] + data.tokens[256:]
    tok = Tokenizer.from_gguf_data(replace(data, tokens=tokens, token_types=[1] * 258 + [3, 3, 3],
                                           merges=["Ġ a", "Ġa b"], bos_id=258, eos_id=260, pad_id=258))
    assert tok.encode(" ab a") == [257, 256]
    assert tok.token_bytes(257) == b" ab" and tok.decode([257, 256]) == " ab a"


@pytest.mark.slow
def test_stdlib_sources_match_reference(tok, reference):
    """Every .py file of the installed standard library tokenizes exactly as the reference does."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts = []
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts:
            continue
        try:
            texts.append(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
    assert len(texts) > 1000

    t0 = time.perf_counter()
    ours = [tok.encode(t) for t in texts]
    t1 = time.perf_counter()
    theirs = [reference.encode(t, add_special_tokens=False).ids for t in texts]
    t2 = time.perf_counter()
    mismatched = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert mismatched == []
    n = sum(map(len, ours))
    print(f"\n{len(texts)} files, {n} tokens: tiktoken {n / (t1 - t0):,.0f} tok/s, tokenizers {n / (t2 - t1):,.0f} tok/s")
    assert all(tok.decode(ids) == text for ids, text in zip(ours[:200], texts[:200]))


def _is_partial_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True
