"""runtime.options: RuntimeOptions defaults, validation, from_env, and an engine built from options ignoring the env."""
from pathlib import Path

import pytest

from runtime import cpu_kernels, weights
from runtime.models import default_cache_dir
from runtime.options import RuntimeOptions, parse_bytes


def test_defaults():
    assert RuntimeOptions() == RuntimeOptions(device="auto", threads=None, cache_dir=default_cache_dir(), cpu_kernel=True,
                                              cpu_kernel_max_m=256, prefix_cache_bytes=1 << 30)


def test_from_env_reads_every_variable(tmp_path):
    env = {"AGENT_DEVICE": "CPU", "AGENT_THREADS": "3", "AGENT_CACHE_DIR": str(tmp_path / "c"), "AGENT_CPU_KERNEL": "off",
           "AGENT_CPU_KERNEL_MAX_M": "8", "AGENT_PREFIX_CACHE_BYTES": "64M", "UNRELATED": "x"}
    assert RuntimeOptions.from_env(env) == RuntimeOptions(device="cpu", threads=3, cache_dir=tmp_path / "c",
                                                          cpu_kernel=False, cpu_kernel_max_m=8,
                                                          prefix_cache_bytes=64 << 20)
    assert RuntimeOptions.from_env({}) == RuntimeOptions()
    assert RuntimeOptions.from_env({"AGENT_THREADS": "0", "AGENT_DEVICE": " ", "AGENT_CPU_KERNEL": "1"}) == RuntimeOptions()


@pytest.mark.parametrize("env, message", [
    ({"AGENT_DEVICE": "gpu"}, "bad AGENT_* setting: device must be one of auto, cpu, cuda, got 'gpu'"),
    ({"AGENT_THREADS": "many"}, "AGENT_THREADS must be an integer, got 'many'"),
    ({"AGENT_THREADS": "-2"}, "bad AGENT_* setting: threads must be an integer >= 1 (or unset), got -2"),
    ({"AGENT_CPU_KERNEL_MAX_M": "512"}, "bad AGENT_* setting: cpu_kernel_max_m must be an integer in 1..256, got 512"),
    ({"AGENT_PREFIX_CACHE_BYTES": "lots"},
     "AGENT_PREFIX_CACHE_BYTES must be a size (e.g. 1073741824, 512M, 2G), got 'lots'"),
])
def test_bad_values_are_one_line_errors(env, message):
    with pytest.raises(ValueError) as e:
        RuntimeOptions.from_env(env)
    assert str(e.value) == message


def test_construction_validates():
    with pytest.raises(ValueError, match="prefix_cache_bytes must be an integer >= 0, got -1"):
        RuntimeOptions(prefix_cache_bytes=-1)
    with pytest.raises(ValueError, match="cpu_kernel_max_m must be an integer in 1..256, got 0"):
        RuntimeOptions(cpu_kernel_max_m=0)
    assert RuntimeOptions(cache_dir="~/x").cache_dir == Path("~/x").expanduser()


def test_parse_bytes():
    assert parse_bytes("1073741824") == 1 << 30
    assert parse_bytes("512M") == 512 << 20 and parse_bytes("2G") == 2 << 30 and parse_bytes("1.5GiB") == 3 << 29
    assert parse_bytes("0") == 0 and parse_bytes("lots") is None and parse_bytes("-1") is None


def test_an_engine_built_from_options_reads_no_env(tiny_gguf_path, tmp_path, monkeypatch):
    from runtime.engine import LocalEngine

    for name, value in (("AGENT_DEVICE", "bogus"), ("AGENT_THREADS", "bogus"), ("AGENT_CPU_KERNEL_MAX_M", "bogus"),
                        ("AGENT_PREFIX_CACHE_BYTES", "0"), ("AGENT_CACHE_DIR", str(tmp_path / "env-cache"))):
        monkeypatch.setenv(name, value)  # from_env would raise on these; the engine must not look
    options = RuntimeOptions(device="cpu", threads=1, cache_dir=tmp_path / "cache", cpu_kernel=False, cpu_kernel_max_m=8,
                             prefix_cache_bytes=1 << 20)
    try:
        engine = LocalEngine.from_spec(str(tiny_gguf_path), options)
        assert (cpu_kernels.enabled(), cpu_kernels.max_m()) == (False, 8)
        assert engine.prefix_store.budget == 1 << 20 and engine.prefix_store.dir.parent == tmp_path / "cache" / "prefix-kv"
        assert (tmp_path / "cache" / "converted").is_dir() and not (tmp_path / "env-cache").exists()
    finally:
        cpu_kernels.configure()  # the kernel back on for the tests after this one
        weights.reset_kernel_state()
