#!/usr/bin/env bash
# Runs the native backend on an emulated AVX2-only CPU (qemu-user's Haswell model:
# AVX2, FMA, F16C, no AVX-512), as users with AMD EPYC machines without AVX-512
# have it. Catches any instruction wider than the CPU in code that runs there:
# a SIGILL, or a wrong kernel choice, fails this script.
#   bash scripts/test-avx2-only.sh            # sparq backends + native and conformance suites
# Needs qemu-user (apt-get install -y qemu-user). vitest runs its workers as
# threads, so every test runs inside the one emulated process.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v qemu-x86_64 >/dev/null 2>&1; then
  echo "test-avx2-only: qemu-x86_64 not found (apt-get install -y qemu-user)" >&2
  exit 1
fi
node_bin="$(command -v node)"
emulate() { qemu-x86_64 -cpu Haswell "$node_bin" "$@" 2> >(grep -v "TCG doesn't support" >&2); }

# The command as users and `pnpm sparq` run it (the bin, on dist/ here), and on the sources.
for run in "packages/sparq/bin/sparq.js" "--conditions=sparq-source packages/sparq/bin/sparq.js"; do
  # shellcheck disable=SC2086 # $run is the node arguments, split on purpose
  out=$(emulate $run backends)
  echo "$out"
  if ! grep -q "native: active (kernel avx2" <<<"$out"; then
    echo "test-avx2-only: expected 'node $run backends' on the native backend's avx2 kernels, got the lines above" >&2
    exit 1
  fi
done
# Under emulation these suites look for an instruction wider than the CPU; the property
# tests' full case counts run on the real CPU, where the AVX2 path is forced too. A quarter
# of the cases keeps this stage near 5 minutes (test/support/runs.ts).
export SPARQ_FC_SCALE="${SPARQ_FC_SCALE:-0.25}"
# One test file at a time: the files share one process here (worker threads), and the
# kernel path a test forces (forceKernelPath) is process-wide. Emulation runs code
# 10-30x slower than the CPU would, so a test gets 5 minutes instead of 1.
emulate node_modules/vitest/vitest.mjs run test/native test/conformance --pool=threads --no-file-parallelism --testTimeout=300000
