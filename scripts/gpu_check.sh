#!/usr/bin/env bash
# GPU checks of `trainrig probe`, for a CUDA machine; under 5 minutes on one GPU.
#
#   OUT=/some/dir scripts/gpu_check.sh
#
# Needs torch with CUDA (installed here when missing: TORCH_SPEC, default "torch", e.g.
# TORCH_SPEC="torch==2.13.0"). Where trainrig's dependencies are missing and wheels lie in .whl/
# (a machine with no package index), they are installed from there into $SITE (default
# /tmp/gpu_check_site) first.
# Writes under $OUT (default ./gpu_check_out):
#   nvidia-smi-q.txt, nvidia-smi-topo.txt   what the driver says
#   nvml_idle.json, nvml_load.json          real NVML recordings (idle / under a GEMM load), in the
#                                           format `trainrig probe --nvml-fake FILE` replays
#   probe.json, probe_tables.txt,           the full probe: JSON, tables, HTML, HardwareProfile
#   probe.html, profile.json
#   pytest.txt                              the GPU tests (probe GEMM/copies/NCCL, real NVML, a monitored
#                                           CUDA loop with a Prometheus scrape)
#   bench/bench_set.json, bench/runs/*.json `trainrig bench` of benchmarks/bench_set.py's jobs: measured vs
#   bench_table.txt, bench_validate.txt     estimated per job, the saved measured runs, validate's table
#   bench/profile.json, profile_table.txt   benchmarks/bench_profile.py: kernel time by kind (GEMM, attention,
#                                           elementwise, ...) of six bench jobs beside their estimates
#   targets.json                            the three GPU targets, printed as a table, then the bench and
#                                           profile tables
# Exit status: 0 when every target and test passed, 1 when one failed, 2 when no GPU/torch.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
STORAGE_PATH="${STORAGE_PATH:-$PWD}"
log() { echo "[gpu_check $(date +%T)] $*" | tee -a "$OUT/gpu_check.log" >&2; }

# -- environment -------------------------------------------------------------------------------
if ! "$PY" -c "import torch" 2>/dev/null; then
  log "torch missing: pip install ${TORCH_SPEC:-torch}"
  "$PY" -m pip install -q "${TORCH_SPEC:-torch}" >>"$OUT/pip.log" 2>&1 || { log "no torch"; exit 2; }
fi
if ! "$PY" -c "import trainrig.probe" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  # a machine with no package index (a lent GPU machine): the wheels carried in .whl/ (pydantic and
  # its needs; docs/measurements.md), unpacked beside this checkout's source, nothing else installed
  SITE="${SITE:-${TMPDIR:-/tmp}/gpu_check_site}"
  log "installing the wheels in .whl/ into $SITE"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    .whl/*.whl >>"$OUT/pip.log" 2>&1 || log "could not install the wheels in .whl/"
  export PYTHONPATH="$SITE:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! "$PY" -c "import trainrig.probe" 2>/dev/null; then
  log "installing trainrig from this checkout"
  "$PY" -m pip install -q -e ".[test]" >>"$OUT/pip.log" 2>&1 \
    || "$PY" -m pip install -q --no-deps -e . >>"$OUT/pip.log" 2>&1 \
    || export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
fi
for module in pydantic typer rich psutil pynvml numpy pytest; do
  "$PY" -c "import $module" 2>/dev/null || "$PY" -m pip install -q \
    "$( [ "$module" = pynvml ] && echo nvidia-ml-py || echo "$module")" >>"$OUT/pip.log" 2>&1 \
    || log "could not install $module"
done
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  log "torch sees no CUDA device"; exit 2
fi
"$PY" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, \
  torch.cuda.device_count(), 'x', torch.cuda.get_device_name(0))" | tee -a "$OUT/gpu_check.log"
nvidia-smi -q >"$OUT/nvidia-smi-q.txt" 2>&1 || true
nvidia-smi topo -m >"$OUT/nvidia-smi-topo.txt" 2>&1 || true
TRAINRIG=("$PY" -c "from trainrig.cli.main import main; main()")

# -- real NVML recordings ------------------------------------------------------------------------
log "recording NVML (idle, then under load)"
timeout 60 "${TRAINRIG[@]}" probe --record-nvml "$OUT/nvml_idle.json" 2>>"$OUT/gpu_check.log"
timeout 90 "$PY" -m trainrig.probe.gpu_targets record-under-load "$OUT/nvml_load.json" \
  2>>"$OUT/gpu_check.log"

# -- the full probe ------------------------------------------------------------------------------
log "full probe (time limit ${PROBE_LIMIT_S:-90} s)"
timeout $(( ${PROBE_LIMIT_S:-90} + 60 )) "${TRAINRIG[@]}" probe --json \
  --time-limit "${PROBE_LIMIT_S:-90}" --storage-path "$STORAGE_PATH" \
  --save "$OUT/profile.json" --html "$OUT/probe.html" >"$OUT/probe.json" 2>"$OUT/probe.stderr"
probe_rc=$?
log "probe exit $probe_rc"
"$PY" -m trainrig.probe.gpu_targets tables "$OUT/probe.json" >"$OUT/probe_tables.txt" 2>&1

# -- GPU tests -------------------------------------------------------------------------------------
log "GPU tests"
timeout 150 "$PY" -m pytest tests/probe/test_gpu.py tests/probe/test_nvml.py tests/monitor/test_gpu_real.py \
  -q -rs -p no:cacheprovider >"$OUT/pytest.txt" 2>&1
tests_rc=$?
tail -n 3 "$OUT/pytest.txt" | tee -a "$OUT/gpu_check.log"

# -- trainrig bench: real training steps of a fixed job set, each beside its estimate -----------------
log "bench set (9 jobs of 2-6 layers, 5 steps each; no job starts after ${BENCH_LIMIT_S:-80} s)"
timeout $(( ${BENCH_LIMIT_S:-80} + 120 )) "$PY" benchmarks/bench_set.py --device cuda --steps 5 --warmup 2 \
  --time-limit-s "${BENCH_LIMIT_S:-80}" --out "$OUT/bench" >"$OUT/bench_table.txt" 2>>"$OUT/gpu_check.log"
bench_rc=$?
log "bench set exit $bench_rc"
"${TRAINRIG[@]}" validate "$OUT/bench/runs" >"$OUT/bench_validate.txt" 2>&1
log "bench profile (6 jobs, 2 profiled steps each)"
timeout 150 "$PY" benchmarks/bench_profile.py --device cuda --out "$OUT/bench" >"$OUT/profile_table.txt" \
  2>>"$OUT/gpu_check.log"
profile_rc=$?
log "bench profile exit $profile_rc"

# -- targets, printed last ---------------------------------------------------------------------------
extra=()
[ -n "${MEMORY_SPEC_GBS:-}" ] && extra=(--memory-spec-gbs "$MEMORY_SPEC_GBS")
"$PY" -m trainrig.probe.gpu_targets targets "$OUT/probe.json" --out "$OUT/targets.json" \
  --tests-rc "$tests_rc" "${extra[@]}"
rc=$?
cat "$OUT/bench_table.txt" "$OUT/profile_table.txt"
[ "$probe_rc" -ne 0 ] && rc=1
[ "$bench_rc" -ne 0 ] && rc=1
[ "$profile_rc" -ne 0 ] && rc=1
exit "$rc"
