"""Shared fixtures: the real 0.5B model (skipped when its parts are not installed) and tiny random GGUFs.

- small_gguf_path: the assembled Qwen2.5-Coder-0.5B-Instruct GGUF (user cache dir or AGENT_CACHE_DIR): the real
  model the tests run (the test extra installs it); the agent's default is the 1.5B (runtime.models.DEFAULT_MODEL).
- small_model_info: its config, tokenizer data and chat template (runtime.gguf_loader.ModelInfo).
- make_tiny_gguf(path, arch=..., vocab="real"|"bytes", ...): writes a random-weight GGUF and returns the path.
  vocab="real" copies the real model's tokenizer and template when it is installed (opening such a file
  with GGUFReader takes ~12 s: 300k vocabulary strings); vocab="bytes" (or no real model) gives a 261-token
  byte-level vocabulary with ChatML/tool specials and Qwen2.5's template (opens in well under a second).
- tiny_gguf_path: a 2-layer qwen2 written once per session by make_tiny_gguf.
- fresh_kernel_state: the CPU kernel's configuration and linears' plans reset around a test.
- llama_cpp_model: the peer (llama-cpp-python) after a child process decoded the real model with it; skipped when
  it is not installed or that child crashed (its ggml build segfaults on some CPUs, an Intel Xeon with AMX among
  them): a crash in-process would take the whole test run down.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SMALL_MODEL = "qwen2.5-coder-0.5b"  # tests run the smaller registered model: half the time of the default
TINY_DIMS = dict(num_layers=2, hidden=64, heads=4, kv_heads=2, ffn=128)


def _real_model_info():
    from runtime.gguf_loader import read_model_info
    from runtime.models import ModelError, resolve_model

    try:
        return read_model_info(resolve_model(SMALL_MODEL))
    except ModelError as e:
        return e


@pytest.fixture
def fresh_kernel_state():
    """The CPU kernel configured from the environment, no linear's plan kept, before and after the test."""
    from runtime import cpu_kernels, weights

    cpu_kernels.configure()
    weights.reset_kernel_state()
    yield
    cpu_kernels.configure()
    weights.reset_kernel_state()


@pytest.fixture(scope="session")
def small_gguf_path() -> Path:
    from runtime.models import ModelError, resolve_model

    try:
        return resolve_model(SMALL_MODEL)
    except ModelError as e:
        pytest.skip(f"the 0.5B test model is not installed ({e})")


@pytest.fixture(scope="session")
def llama_cpp_model(small_gguf_path):
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (the reference)")
    probe = ("import sys, llama_cpp\n"
             "m = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=512, n_threads=2, logits_all=True, verbose=False)\n"
             "m.eval(m.tokenize(b'def fibonacci(n):\\n    return n' * 8))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(small_gguf_path)], capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
        pytest.skip(f"llama-cpp-python cannot decode the model on this machine ({how}): "
                    f"{(done.stderr.strip().splitlines() or [''])[-1][:200]}")
    return llama_cpp


@pytest.fixture(scope="session")
def small_model_info(small_gguf_path):
    from runtime.gguf_loader import read_model_info

    return read_model_info(small_gguf_path)


@pytest.fixture(scope="session")
def make_tiny_gguf():
    """make_tiny_gguf(path, arch="qwen2", vocab="real", tie=True, weight_type="F32", seed=0, **dims) -> path."""
    info = _real_model_info()
    real = None if isinstance(info, Exception) else info

    def make(path: Path, arch: str = "qwen2", vocab: str = "real", tie: bool = True, weight_type: str = "F32",
             seed: int = 0, **dims) -> Path:
        assert vocab in ("real", "bytes"), vocab
        tokenizer = real if vocab == "real" else None
        return _write_tiny_gguf(Path(path), arch, tie, weight_type, seed, {**TINY_DIMS, **dims}, tokenizer)

    return make


@pytest.fixture(scope="session")
def tiny_gguf_path(make_tiny_gguf, tmp_path_factory) -> Path:
    return make_tiny_gguf(tmp_path_factory.mktemp("tiny") / "tiny-qwen2.gguf")


def _write_tiny_gguf(path: Path, arch: str, tie: bool, weight_type: str, seed: int, dims: dict, tokenizer) -> Path:
    import gguf
    from gguf.quants import quantize

    layers, hidden, heads, kv_heads, ffn = (dims[k] for k in ("num_layers", "hidden", "heads", "kv_heads", "ffn"))
    head_dim = dims.get("head_dim", hidden // heads)
    if tokenizer is not None:
        td = tokenizer.tokenizer_data
        tokens, types, merges, template = td.tokens, td.token_types, td.merges, tokenizer.chat_template
        bos, eos, pad = td.bos_id, td.eos_id, td.pad_id
    else:
        tokens, types, merges, template = _fallback_vocab()
        bos = pad = tokens.index("<|endoftext|>")
        eos = tokens.index("<|im_end|>")
    vocab = len(tokens)

    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"tiny-random-{arch}")
    w.add_block_count(layers)
    w.add_context_length(4096)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    if arch == "qwen3" or head_dim != hidden // heads:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_rope_freq_base(1_000_000.0 if arch != "llama" else 500_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2" if tokenizer is None else tokenizer.tokenizer_data.pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    if merges:
        w.add_token_merges(merges)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_pad_token_id(pad)
    w.add_add_bos_token(False)
    w.add_chat_template(template)

    rng = np.random.default_rng(seed)
    qtype = gguf.GGMLQuantizationType[weight_type]

    def matrix(name: str, rows: int, cols: int, scale: float = 0.05) -> None:
        x = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, x)
        else:
            w.add_tensor(name, quantize(x, qtype), raw_dtype=qtype)

    def vector(name: str, n: int, base: float = 0.0, scale: float = 0.05) -> None:
        w.add_tensor(name, (base + rng.standard_normal(n) * scale).astype(np.float32))

    matrix("token_embd.weight", vocab, hidden, 0.5)
    for i in range(layers):
        p = f"blk.{i}."
        vector(p + "attn_norm.weight", hidden, 1.0)
        matrix(p + "attn_q.weight", heads * head_dim, hidden)
        matrix(p + "attn_k.weight", kv_heads * head_dim, hidden)
        matrix(p + "attn_v.weight", kv_heads * head_dim, hidden)
        if arch == "qwen2":
            vector(p + "attn_q.bias", heads * head_dim)
            vector(p + "attn_k.bias", kv_heads * head_dim)
            vector(p + "attn_v.bias", kv_heads * head_dim)
        if arch == "qwen3":
            vector(p + "attn_q_norm.weight", head_dim, 1.0)
            vector(p + "attn_k_norm.weight", head_dim, 1.0)
        matrix(p + "attn_output.weight", hidden, heads * head_dim)
        vector(p + "ffn_norm.weight", hidden, 1.0)
        matrix(p + "ffn_gate.weight", ffn, hidden)
        matrix(p + "ffn_up.weight", ffn, hidden)
        matrix(p + "ffn_down.weight", hidden, ffn)
    vector("output_norm.weight", hidden, 1.0)
    if not tie:
        matrix("output.weight", vocab, hidden)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _fallback_vocab():
    """256 GPT-2 byte tokens (no merges) + ChatML/tool specials, with Qwen2.5's chat template."""
    from runtime.tokenizer import gpt2_byte_decoder

    by_byte = {b: c for c, b in gpt2_byte_decoder().items()}
    tokens = [by_byte[b] for b in range(256)]
    types = [1] * 256
    for special, kind in (("<|endoftext|>", 3), ("<|im_start|>", 3), ("<|im_end|>", 3),
                          ("<tool_call>", 4), ("</tool_call>", 4)):
        tokens.append(special)
        types.append(kind)
    return tokens, types, [], QWEN25_TEMPLATE


# Qwen2.5-Instruct's tokenizer_config.json chat_template (as embedded in its GGUFs); used only when the
# real model is not installed.
QWEN25_TEMPLATE = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""
