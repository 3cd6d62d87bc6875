#!/usr/bin/env bash
# Builds the native addon with AddressSanitizer and UBSan (float-cast-overflow
# included, every report fatal) into packages/native/build-sanitize, then runs
# the suites that drive native code under it. Any report fails the run.
#   pnpm test:sanitize                 # native, conformance and fuzz suites
#   pnpm test:sanitize test/native     # just these
set -euo pipefail
cd "$(dirname "$0")/.."
node packages/native/scripts/build.mjs --sanitize --strict
cxx="${CXX:-g++}"
export LD_PRELOAD="$("$cxx" -print-file-name=libasan.so):$("$cxx" -print-file-name=libubsan.so)"
# Node itself is not built with ASan: leak checking would report V8's own allocations.
# allocator_may_return_null: an allocation too large for the machine fails as it would without ASan
# (node throws its RangeError) instead of aborting the process.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export SPARQ_NATIVE_BUILD="$PWD/packages/native/build-sanitize"
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(test/native test/conformance $(ls -d test/fuzz 2>/dev/null || true))
node node_modules/vitest/vitest.mjs run "${suites[@]}"
