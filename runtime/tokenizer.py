"""Byte-level BPE tokenizer on tiktoken, built from a GGUF vocabulary (runtime.gguf_loader.TokenizerData).

Normal tokens become tiktoken mergeable ranks with rank = token id: in GPT-2-style vocabularies
(Qwen2, Llama 3) ids 0..255 are the single bytes and merge i creates token 256 + i, so id order
is merge priority. This is checked on construction. Control, user-defined and unused tokens
become tiktoken special tokens, which only `encode_with_specials` turns into ids.
"""
from __future__ import annotations

import codecs
from functools import lru_cache

import tiktoken

from runtime.gguf_loader import TokenizerData
from runtime.models import ModelError

# Hugging Face tokenizer.json pre_tokenizer Split patterns, keyed by GGUF tokenizer.ggml.pre.
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
PRE_TOKENIZER_PATTERNS = {"qwen2": QWEN2_PATTERN, "llama-bpe": LLAMA3_PATTERN}

NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5  # gguf.TokenType values


@lru_cache(maxsize=1)
def gpt2_byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's bytes_to_unicode: printable stand-in character -> byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


class Tokenizer:
    """encode/decode for one model vocabulary; `encode` never produces special tokens."""

    def __init__(self, encoding: tiktoken.Encoding, data: TokenizerData):
        self._enc = encoding
        self.vocab_size = len(data.tokens)
        self.special_ids: dict[str, int] = dict(encoding._special_tokens)
        self._special_id_set = frozenset(self.special_ids.values())
        self.eos_id = data.eos_id
        self.bos_id = data.bos_id
        self.pad_id = data.pad_id
        self.im_start_id = self.special_ids.get("<|im_start|>")
        self.im_end_id = self.special_ids.get("<|im_end|>")
        self.tool_call_start_id = self.special_ids.get("<tool_call>")
        self.tool_call_end_id = self.special_ids.get("</tool_call>")
        # Tokens that end a generated turn: the declared eos plus the chat end-of-turn markers present.
        stops = {data.eos_id, self.im_end_id, self.special_ids.get("<|endoftext|>"), self.special_ids.get("<|eot_id|>")}
        self.stop_ids: frozenset[int] = frozenset(i for i in stops if i is not None)

    @classmethod
    def from_gguf_data(cls, data: TokenizerData) -> "Tokenizer":
        if data.model != "gpt2":
            raise ModelError(f"tokenizer model {data.model!r} is not supported (only byte-level BPE, 'gpt2')")
        pattern = PRE_TOKENIZER_PATTERNS.get(data.pre)
        if pattern is None:
            raise ModelError(f"pre-tokenizer {data.pre!r} is not supported; supported are {', '.join(PRE_TOKENIZER_PATTERNS)}")
        table = _byte_table()
        ranks: dict[bytes, int] = {}
        specials: dict[str, int] = {}
        types = data.token_types or [NORMAL] * len(data.tokens)
        for i, (token, kind) in enumerate(zip(data.tokens, types)):
            if kind == NORMAL:
                try:
                    ranks[token.translate(table).encode("latin-1")] = i
                except UnicodeEncodeError:
                    raise ModelError(f"token {i} {token!r} is not GPT-2 byte-encoded; this vocabulary is not byte-level BPE") from None
            else:
                specials[token] = i
        _check_merge_order(data.merges, data.tokens, len(ranks))
        encoding = tiktoken.Encoding(name=f"gguf-{data.pre}", pat_str=pattern, mergeable_ranks=ranks,
                                     special_tokens=specials, explicit_n_vocab=len(data.tokens))
        return cls(encoding, data)

    def encode(self, text: str) -> list[int]:
        """Ordinary text: special-token strings such as '<|im_start|>' stay text."""
        return self._enc.encode_ordinary(text)

    def encode_with_specials(self, text: str) -> list[int]:
        """Template glue only: special-token strings become their ids."""
        return self._enc.encode(text, allowed_special="all")

    def decode(self, ids: list[int]) -> str:
        return self._enc.decode_bytes(ids).decode("utf-8", errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        return self._enc.decode_single_token_bytes(token_id)

    def is_special(self, token_id: int) -> bool:
        return token_id in self._special_id_set

    def decoder(self) -> "IncrementalDecoder":
        return IncrementalDecoder(self)


class IncrementalDecoder:
    """Feed token ids, get text deltas; a UTF-8 character split across tokens is held until complete."""

    def __init__(self, tokenizer: Tokenizer):
        self._tok = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, ids: list[int] | int) -> str:
        if isinstance(ids, int):
            ids = [ids]
        return self._utf8.decode(self._tok._enc.decode_bytes(ids))

    def flush(self) -> str:
        """Whatever is still held (an incomplete character becomes U+FFFD)."""
        return self._utf8.decode(b"", final=True)


def _byte_table() -> dict[int, str]:
    """str.translate table: each GPT-2 stand-in character -> the latin-1 character of its byte; every other
    character below 256 -> one that latin-1 cannot encode (so a token that is not byte-encoded fails)."""
    table = {c: "\uffff" for c in range(256)}
    table.update({ord(c): chr(b) for c, b in gpt2_byte_decoder().items()})
    return table


def _check_merge_order(merges: list[str], tokens: list[str], n_normal: int) -> None:
    """Merge i must create token 256 + i (then id order is merge priority and rank = id is exact)."""
    made = [m.replace(" ", "", 1) for m in merges]
    if len(made) + 256 <= n_normal and tokens[256:256 + len(made)] == made and \
            len(set(tokens[:n_normal])) == n_normal:
        return  # the common case, checked at C speed
    ids = {t: i for i, t in enumerate(tokens[:n_normal])}
    for i, merge in enumerate(merges):
        left, _, right = merge.partition(" ")
        if ids.get(left + right) != 256 + i:
            raise ModelError(f"merge {i} ({merge!r}) does not create token {256 + i}; "
                             "this vocabulary's ids are not in merge order, which the tiktoken tokenizer requires")
