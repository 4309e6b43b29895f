#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, over the bundle scripts/gpu-run made (.gpu/):
# the GPU unit tests, compute-sanitizer memcheck over them, kiln-gpu-probe, kiln-gpu-bench, the
# CLI on the GPU (`kiln run --device cuda`, `kiln gap --device cuda`), the ONNX node tests compiled
# for the GPU (`onnx_conformance --compile --target cuda`), and — when .peers/gpu_peers.py
# was carried along and PyTorch is present — the PyTorch peers, all in one go. Results go to
# $OUT (or ./gpu-results). Why: device time is scarce; one call measures Kiln and its peers together.
#   usage: bash scripts/gpu-device.sh [--no-peers] [--no-memcheck] [--no-conformance | --conformance-only]
set -u
cd "$(dirname "$0")/.."
out=${OUT:-gpu-results}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-gpu-cache}
peers=1 memcheck=1 conformance=1 only_conformance=0
for a in "$@"; do
  case "$a" in
    --no-peers) peers=0 ;;
    --no-memcheck) memcheck=0 ;;
    --no-conformance) conformance=0 ;;
    --conformance-only) only_conformance=1 ;;
    *) echo "usage: $0 [--no-peers] [--no-memcheck] [--no-conformance | --conformance-only]" >&2; exit 2 ;;
  esac
done
# scripts/gpu-run packs the bundle into one archive (the carried files are limited to 64 MiB).
if [ -f .gpu/gpu-bundle.tar.xz ]; then tar -xJf .gpu/gpu-bundle.tar.xz -C .gpu && rm .gpu/gpu-bundle.tar.xz; fi
rc=0
# Few files: the device tool brings back a limited number. Logs go into one file.
log="$out/gpu-device.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$log"
# The ONNX node tests compiled for the GPU (docs/testing.md): the report and the list of compiled
# passes to commit (tests/conformance/onnx_cuda_passing.txt) go to $OUT; once that list is
# committed, a test leaving it fails the script. Compiled failures are listed, not fatal (no
# exceptions file for CUDA yet).
if [ $conformance = 1 ]; then
  cuda_list=tests/conformance/onnx_cuda_passing.txt
  LD_LIBRARY_PATH=$PWD/.gpu:$LD_LIBRARY_PATH .gpu/onnx_conformance --compile --target cuda --data-dir .gpu/onnx-node --jobs 8 --batch 16 \
    --report "$out/onnx-coverage-cuda.md" --write-passing "$out/onnx_cuda_passing.txt" \
    $([ -f $cuda_list ] && echo --passing $cuda_list) > "$out/onnx-conformance-cuda.log" 2>&1 || rc=1
  grep -v '^  \(folded\|reference-only\|compiled FAIL\)' "$out/onnx-conformance-cuda.log" | tail -8 | cut -c1-400 | tee -a "$log"
fi
[ $only_conformance = 1 ] && exit $rc
# The full test output goes to its own file (a failure's explain() text is long); the log keeps
# the failures and the summary.
.gpu/test_cuda --gtest_brief=1 > "$out/test_cuda.log" 2>&1 || rc=1
{ grep -E -A3 "Failure$" "$out/test_cuda.log" | cut -c1-300 | head -60; tail -8 "$out/test_cuda.log"; } | tee -a "$log"
if [ $memcheck = 1 ]; then
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  "$sanitizer" --tool memcheck --error-exitcode 3 \
    .gpu/test_cuda --gtest_brief=1 --gtest_filter='CudaCompiled.*:CudaLibraryKernels.*:CudaBulkRows.*:CudaClusterMail.*:CudaFusedRowReductions.*:CudaRegisterRows.*:CudaStagedRows.*:CudaGpu.*:GpuEager.*' \
    > /tmp/memcheck.log 2>&1
  mc=$?
  echo "memcheck exit $mc" >> /tmp/memcheck.log; tail -4 /tmp/memcheck.log | tee -a "$log"
  [ $mc = 0 ] || rc=1  # an error memcheck finds (exit 3) fails the script, like a failing test
fi
# Differential fuzzing on the GPU (issue 19, item 4): KILN_FUZZ_CUDA_GRAPHS graphs (default 1000;
# 0 skips), the saved regressions replayed first. Mismatches fail the script; shrunk cases go to $out.
fuzz_n=${KILN_FUZZ_CUDA_GRAPHS:-1000}
if [ "$fuzz_n" != 0 ] && [ -x .gpu/kiln-fuzz-diff ]; then
  .gpu/kiln-fuzz-diff --replay tests/fuzz/regressions tests/fuzz/regressions-cuda --target cuda \
    --known-failing tests/fuzz/regressions/known_failing.txt > "$out/fuzz-cuda-regressions.log" 2>&1 || rc=1
  tail -3 "$out/fuzz-cuda-regressions.log" | tee -a "$log"
  .gpu/kiln-fuzz-diff "$fuzz_n" --target cuda --jobs "$(nproc)" --report "$out/fuzz-cuda.md" \
    --save-dir "$out/fuzz-cuda-failures" > "$out/fuzz-cuda.log" 2>&1 || rc=1
  grep -v "^case " "$out/fuzz-cuda.log" | tail -25 | tee -a "$log"
fi
.gpu/kiln-gpu-probe --json "$out/gpu-probe.json" 2>&1 | tail -30 | tee -a "$log"; [ "${PIPESTATUS[0]}" = 0 ] || rc=1
.gpu/kiln-gpu-bench --json "$out/kiln-gpu-bench.json" 2>&1 | tee -a "$log"; [ "${PIPESTATUS[0]}" = 0 ] || rc=1
.gpu/kiln run --device cuda --check 2>&1 | tail -30 | tee -a "$log"; [ "${PIPESTATUS[0]}" = 0 ] || rc=1
.gpu/kiln gap --device cuda --svg "$out/gap-cuda.svg" 2>&1 | tail -20 | tee -a "$log"
if [ $peers = 1 ] && [ -f .peers/gpu_peers.py ] && python3 -c "import torch" 2>/dev/null; then
  (cd "$out" && OUT="$PWD" timeout 420 python3 "$OLDPWD/.peers/gpu_peers.py" > /tmp/peers.log 2>&1); grep -v "^ \|AUTOTUNE\|strides\|dtypes\|Autotune\|^{" /tmp/peers.log | tail -25 | tee -a "$log"
fi
exit $rc
