#!/usr/bin/env bash
# The GPU check, one script, at most 8 minutes on one H200: the GPU tests (tests/kernels on CUDA, the gpu-marked
# engine tests included), then bench/gpu.py on random weights of the registered shapes with its in-run peer (HF
# transformers, static cache + torch.compile); one table at the end. Run from anywhere:
#   bench/gpu_check.sh            on the GPU machine (it reaches no package index)
#   bench/gpu_check.sh --wheels   beforehand, where PyPI is reachable: the pure-Python wheels the GPU image lacks
#                                 (gguf, platformdirs) into .whl/ (git-ignored), for the run to carry and install
# Logs go to $OUT (the device tool's folder) or /tmp/gpu_check.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS=(gguf==0.19.0 platformdirs==4.14.9)
if [ "${1:-}" = "--wheels" ]; then
  exec python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl "${WHEELS[@]}"
fi
LOG=${OUT:-/tmp/gpu_check}
mkdir -p "$LOG"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export AGENT_CACHE_DIR="${AGENT_CACHE_DIR:-/tmp/gpu_check_cache}"
T0=$(date +%s)
if ! python3 -c "import gguf, platformdirs" 2>/dev/null; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpu_check_site .whl/*.whl \
      && export PYTHONPATH="$PYTHONPATH:/tmp/gpu_check_site"
  else
    echo "gpu_check: gguf/platformdirs missing and no .whl/ here (run bench/gpu_check.sh --wheels where PyPI is reachable);" \
         "the engine tests will fail to import"
  fi
fi
python3 - <<'PY'
import torch, triton
print(f"gpu_check: torch {torch.__version__}, triton {triton.__version__}, "
      f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'NO CUDA DEVICE'}")
PY
# 1. tests: every test in tests/kernels on the GPU (the kernel tests, the CUDA model, the engine promises);
#    -rA prints the passed tests' output too (the greedy agreement and its margins, speculation counts)
# pytest-xdist (in the GPU image) compiles the kernels on several cores; one file's tests stay on one worker
XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 6 --dist loadfile")
timeout 300 python3 -m pytest tests/kernels -q -rA -p no:cacheprovider -o addopts="--import-mode=importlib" $XDIST \
  >"$LOG/tests.log" 2>&1
TESTS_RC=$?
grep -E "^(CPU and CUDA|first difference|speculation:|prefix store:)" "$LOG/tests.log"
grep -E "^(FAILED|ERROR) " "$LOG/tests.log" | cut -c1-300
TESTS_LINE=$(grep -E "(passed|failed|error)" "$LOG/tests.log" | tail -n 1 | tr -d '=|')
[ "$TESTS_RC" -eq 124 ] && TESTS_LINE="stopped at 300 s: ${TESTS_LINE:-no summary}"
# 2. the benchmark, within what is left of 8 minutes (bench/gpu.py skips what does not fit, the peer included)
LEFT=$(( 470 - ($(date +%s) - T0) ))
if [ "$LEFT" -gt 60 ]; then
  timeout $((LEFT + 15)) python3 bench/gpu.py --random --decode-steps 64 --reps 3 --budget-s $((LEFT - 45)) \
    >"$LOG/bench.log" 2>&1
  BENCH_RC=$?
else
  echo "bench skipped: $LEFT s left" >"$LOG/bench.log"; BENCH_RC=1
fi
grep -vE "^\|" "$LOG/bench.log" | tail -n 40
echo
echo "| model | figure | how | ms | tok/s | fraction of HBM roofline |"
echo "|---|---|---|---|---|---|"
echo "| - | tests/kernels on CUDA | pytest (exit $TESTS_RC) | - | - | $TESTS_LINE |"
grep -E "^\| [0-9]" "$LOG/bench.log"
[ "$BENCH_RC" -eq 0 ] || echo "| - | bench/gpu.py | exit $BENCH_RC (see bench.log) | - | - | - |"
echo "gpu_check: $(( $(date +%s) - T0 )) s"
exit $(( TESTS_RC != 0 || BENCH_RC != 0 ))
