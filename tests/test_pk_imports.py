"""The shipped packages import from outside the checkout, as `agent` does in a user's repository.

A fresh interpreter, started in an empty folder with a foreign top-level `kernels` package on its path (as
PyPI's `kernels` sits in site-packages: transformers requires it, and xgrammar brings transformers), imports
every module of every package pyproject.toml ships (no `__main__`), and each must come from this checkout. Our
Triton kernels once were a top-level `kernels`, which that package shadowed (site-packages comes before an
editable install's finder): `import runtime.cuda` failed in any process started outside the checkout.
"""
from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import importlib, json, os, pkgutil, sys

files, failed = {}, {}


def load(name):
    try:
        files[name] = importlib.import_module(name).__file__
    except Exception as e:
        failed[name] = f"{type(e).__name__}: {e}"


out = {}
import runtime
out["triton_before_kernels"] = "triton" in sys.modules  # runtime/__init__.py must not import it
load("runtime.kernels")  # first, so that its __init__ is what sets TRITON_INTERPRET
out["interpret"] = os.environ.get("TRITON_INTERPRET")
out["interpreted"] = getattr(sys.modules.get("runtime.kernels"), "INTERPRETED", None)
import torch
out["cuda"] = torch.cuda.is_available()
for top in sys.argv[1:]:
    load(top)
    for info in pkgutil.walk_packages(importlib.import_module(top).__path__, top + "."):
        if info.name.rsplit(".", 1)[-1] != "__main__":  # running it is what `python -m` does
            load(info.name)
out["foreign_kernels"] = importlib.import_module("kernels").__file__  # whatever holds the name, not us
out["files"], out["failed"] = files, failed
print(json.dumps(out))
"""


def _shipped_packages() -> list[str]:
    """pyproject.toml's [tool.setuptools.packages.find] include patterns."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]


def test_no_top_level_kernels_package_is_shipped():
    include = _shipped_packages()
    assert not any(fnmatch.fnmatchcase("kernels", pattern) for pattern in include), include
    assert not (ROOT / "kernels").exists()
    assert (ROOT / "runtime" / "kernels" / "__init__.py").is_file()


def test_every_shipped_module_imports_from_the_checkout_outside_it(tmp_path):
    foreign = tmp_path.resolve() / "site"  # stands for site-packages holding PyPI's `kernels`
    (foreign / "kernels").mkdir(parents=True)
    (foreign / "kernels" / "__init__.py").write_text('"""Not ours: a package that happens to be named kernels."""\n')
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET", "PYTHONSAFEPATH")}
    env["PYTHONPATH"] = str(foreign)
    tops = sorted({pattern.rstrip("*").rstrip(".") for pattern in _shipped_packages()})
    assert "runtime" in tops and "agent" in tops
    proc = subprocess.run([sys.executable, "-c", _CHILD, *tops], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"(is the checkout installed? pip install -e .)\n{proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])

    assert out["failed"] == {}  # e.g. runtime.cuda, when a foreign `kernels` stood in for ours
    assert not out["triton_before_kernels"]
    if not out["cuda"]:  # runtime/kernels/__init__.py turns the interpreter on before triton is imported
        assert out["interpret"] == "1" and out["interpreted"]
    assert Path(out["foreign_kernels"]).resolve().is_relative_to(foreign)  # the name is not ours to need
    for must in ("runtime.kernels", "runtime.kernels.attention", "runtime.cuda", "tools", "hooks", "skills"):
        assert must in out["files"], must
    outside = {name: f for name, f in out["files"].items() if not Path(f).resolve().is_relative_to(ROOT)}
    assert outside == {}
