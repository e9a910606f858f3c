"""tests/kernels: kernel_tolerance.py (the tolerance rule every kernel test uses) importable from here on."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # --import-mode=importlib: make kernel_tolerance importable
