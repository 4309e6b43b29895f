#!/usr/bin/env bash
# Runs the CPU benchmark: Kiln eager + compiled (bench/cpu_bench.cc) and the Python peers
# (bench/cpu_peers.py: PyTorch eager, torch.compile, ONNX Runtime), 2 threads pinned to 2 cores.
# Usage: bench/run_cpu.sh [build_dir=build-compile] > bench/results/cpu-$(date +%F).md
# glibc's malloc is told to keep large blocks (no fresh mmap per output): otherwise every run pays
# first-touch page faults on its outputs, which costs more than the kernels on the 32M chains.
set -euo pipefail
build=${1:-build-compile}
cd "$(dirname "$0")/.."
export MALLOC_MMAP_THRESHOLD_=2147483647 MALLOC_TRIM_THRESHOLD_=4294967295 OMP_NUM_THREADS=2
py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python
echo "# CPU benchmark, $(date -u +%F), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
taskset -c 0,1 "$build/kiln_cpu_bench" --threads 2 --repeats 7
echo
taskset -c 0,1 "$py" bench/cpu_peers.py --threads 2 --repeats 7 2>/dev/null
