#!/usr/bin/env bash
# GPU check of the proposals stage (issue 13: "where a GPU machine is available, run the stage on it once"; issue 34:
# "record the share of time the GPU waits"). Needs the `vision` extra on a machine with a CUDA device; run from the
# repository root:
# 1. the CUDA test (the stage on cuda gives the CPU run's candidates and boxes) and the stage tests;
# 2. bench_proposals stage with the real small random-weight models on the GPU (1024x768 images, 64 queries, zero
#    thresholds), three fresh runs: per image the models' device time, the CPU work outside it, and
#    gpu_wait_share = that CPU work / the shard's wall time (the share of time the GPU waits for decoding, resizing,
#    prompts, NMS, filters, mask strings and writes). Figures go to $OUT/proposals_gpu.json (OUT defaults to .).
set -uo pipefail
PY=${PYTHON:-python3}
OUT=${OUT:-.}
$PY -m pytest -p no:cacheprovider -o addopts="" -q --import-mode=importlib \
    tests/tasks/proposals/test_stage_cuda.py tests/tasks/proposals/test_stage.py
status=$?
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
$PY -m benchmarks.bench_proposals stage --forward real --device cuda --repeats 3 --json "$OUT/proposals_gpu.json" \
    || status=1
exit $status
