#!/usr/bin/env bash
# The CUDA checks of issue 16, as one command for a lent GPU machine (the `device` tool's
# `run`: its python3 has numpy, pytest, torch and scikit-learn but not this project's other
# needs, and it reaches no package registry). Logs go to $OUT (or /tmp/gpu-check).
#
# Before the call, here, in the repository root (the wheels travel as an ignored folder):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl sqlalchemy greenlet alembic mako xgboost-cpu
# then: run(command="bash bench/gpu_device_check.sh", carry=[".whl"], timeout_s=600)
#
# Steps (each bounded, so a hang in one leaves time for the next):
#   1. the CUDA tests (tests/schedule/test_cuda.py, tests/workers/test_cuda_device.py);
#   2. `tensortune tune` of GEMM 1024 on the GPU (64 trials), then the untuned program, the
#      tuned best from that database and PyTorch re-timed (bench/gpu_cuda.py --trials 0);
#   3. bench/gpu_cuda.py: GEMM 4096 and ResNet-18's first 3x3 conv tuned, against cuBLAS
#      and cuDNN.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${OUT:-/tmp/gpu-check}"
mkdir -p "$out"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH="/tmp/site:$PWD"
else
    export PYTHONPATH="$PWD"
fi
export PYTHONUNBUFFERED=1 TENSORTUNE_HOME=/tmp/tt-home
trials="${GPU_CHECK_TRIALS:-128}"

nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv \
    | tee "$out/gpu.txt"
nvcc --version | tail -2 | tee -a "$out/gpu.txt"

echo "== 1. CUDA tests"
timeout 180 python3 -m pytest -q -p no:cacheprovider -o addopts="" -rs \
    tests/schedule/test_cuda.py tests/workers/test_cuda_device.py 2>&1 | tee "$out/tests.log"

echo "== 2. tensortune tune: GEMM 1024 on the GPU, 64 trials"
timeout 150 python3 -m tuner tune --op matmul -p M=1024 -p N=1024 -p K=1024 --target cuda \
    --trials 64 --baselines none --quiet --db "sqlite:///$out/cuda.db" 2>&1 | tee "$out/cli.log"
timeout 90 python3 bench/gpu_cuda.py --only gemm1024 --trials 0 --rounds 3 \
    --db "sqlite:///$out/cuda.db" 2>&1 | tee -a "$out/cli.log"

echo "== 3. GEMM 4096 and the ResNet-18 conv against cuBLAS / cuDNN, $trials trials"
timeout 300 python3 bench/gpu_cuda.py --only gemm4096,r18_64 --trials "$trials" --rounds 3 \
    2>&1 | tee "$out/bench.log"
