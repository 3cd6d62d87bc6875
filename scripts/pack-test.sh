#!/usr/bin/env bash
# The packages as a user gets them: build and pack every package (with the
# prebuilt native addon), install the tarballs with npm into a fresh project
# outside the workspace, run every example with plain node, and type-check a
# TypeScript consumer (NodeNext, strict). Then again with no C++ compiler on
# PATH: the prebuilt addon is used; without it, the reference backend runs and
# `sparq backends` says why and how to build.
#
#   scripts/pack-test.sh [MODEL]   (default ../shared/models/stories260K.bin)
#
# Prints each tarball's size and files and the install times. KEEP=1 keeps the
# temporary folder.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODEL="$(realpath "${1:-$ROOT/../shared/models/stories260K.bin}")"
TOKENIZER="$(dirname "$MODEL")/tok512.bin"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sparq-pack-XXXXXX")"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
step() { echo "pack-test: $*"; }
fail() { echo "pack-test: FAIL: $*" >&2; exit 1; }
[ -f "$MODEL" ] || fail "no model at $MODEL"

cd "$ROOT"
step "build (tsc) and the prebuilt addon"
pnpm -s build
# Reuses the objects pnpm install compiled (same flags); links with libstdc++ static.
node packages/native/scripts/build.mjs --prebuilt --strict
PREBUILT="prebuilds/$(node -p 'process.platform + "-" + process.arch')/node.napi.glibc.node"
[ -f "packages/native/$PREBUILT" ] || fail "no $PREBUILT"

step "pack"
mkdir -p "$WORK/tarballs"
# The playground is private: it runs from the repository (sparq playground), not from npm.
pnpm -s -r --filter '!@sparq/playground' pack --pack-destination "$WORK/tarballs" >/dev/null
for tgz in "$WORK"/tarballs/*.tgz; do
  files="$(tar tzf "$tgz" | sed 's|^package/||' | sort)"
  echo "  $(basename "$tgz"): $(du -k "$tgz" | cut -f1) KiB packed, $(echo "$files" | wc -l) files"
  echo "$files" | awk '{ printf "    %s\n", $0 }' | grep -v '\.map$' || true
  stray="$(grep -E '(^|/)build/|\.o$|UNAVAILABLE|\.tsbuildinfo$|(^|/)test/|node_modules' <<<"$files" || true)"
  [ -z "$stray" ] || fail "$(basename "$tgz") carries stray files: $stray"
  grep -qx LICENSE <<<"$files" || fail "$(basename "$tgz") has no LICENSE"
done
grep -qx "package/$PREBUILT" <<<"$(tar tzf "$WORK/tarballs/sparq-native-0.1.0.tgz")" || fail "the native tarball lacks $PREBUILT"

# A fresh project: sparq from its tarball, every @sparq/* package pinned to its tarball too.
new_app() {
  local app="$1"
  mkdir -p "$app"
  cp -r "$ROOT/examples/." "$app/"
  node -e '
    const fs = require("fs");
    const dir = process.argv[1];
    const tgz = (name) => "file:" + dir + "/" + name + "-0.1.0.tgz";
    const overrides = {};
    for (const p of ["core", "reference", "native", "llm", "pool", "cli"]) overrides["@sparq/" + p] = tgz("sparq-" + p);
    fs.writeFileSync(process.argv[2] + "/package.json", JSON.stringify({ name: "app", private: true, type: "module", dependencies: { sparq: tgz("sparq"), "@types/node": "^20" }, overrides }, null, 2));
  ' "$WORK/tarballs" "$app"
}
install_app() {
  local app="$1"; shift
  local t0=$SECONDS
  (cd "$app" && env "$@" npm install --no-audit --no-fund --loglevel=error)
  echo "  npm install: $((SECONDS - t0)) s"
}
run_examples() {
  local app="$1"; shift
  (
    cd "$app"
    env "$@" ./node_modules/.bin/sparq --version
    env "$@" ./node_modules/.bin/sparq backends
    env "$@" node hello.mjs "$MODEL" > hello.out
    grep -q . hello.out || fail "hello.mjs printed nothing"
    env "$@" node stream-abort.mjs "$MODEL" > /dev/null
    env "$@" node raw-sparq.mjs
    env "$@" node choose-backend.mjs "$MODEL"
    # The bin prints llama2.c's greedy text byte for byte.
    if [ -f "$TOKENIZER" ] && [ -f "$(dirname "$MODEL")/stories260K_greedy200.txt" ]; then
      env "$@" ./node_modules/.bin/sparq generate --model "$MODEL" --tokenizer "$TOKENIZER" -n 200 --temperature 0 2>/dev/null | cmp - "$(dirname "$MODEL")/stories260K_greedy200.txt" || fail "sparq generate differs from llama2.c's output"
    fi
  )
}

step "install the tarballs with npm into $WORK/app"
new_app "$WORK/app"
install_app "$WORK/app"
[ -f "$WORK/app/node_modules/@sparq/native/build/sparq_native.node" ] && fail "install compiled the addon although the prebuilt one fits"
step "examples with plain node"
run_examples "$WORK/app"
grep -q '^native: active' <<<"$(cd "$WORK/app" && ./node_modules/.bin/sparq backends)" || fail "native is not active with the prebuilt addon"
# The prebuilt addon on older CPUs (emulated): baseline x86-64 runs the scalar kernels, an AVX2-only CPU the AVX2 ones.
if command -v qemu-x86_64 >/dev/null 2>&1; then
  for cpu in qemu64:scalar Haswell:avx2; do
    step "prebuilt addon on an emulated ${cpu%%:*} CPU"
    report="$(cd "$WORK/app" && qemu-x86_64 -cpu "${cpu%%:*}" "$(command -v node)" node_modules/.bin/sparq backends 2>/dev/null)"
    grep -q "^native: active (kernel ${cpu##*:}," <<<"$report" || fail "on ${cpu%%:*}: $report"
    (cd "$WORK/app" && qemu-x86_64 -cpu "${cpu%%:*}" "$(command -v node)" hello.mjs "$MODEL" 2>/dev/null | cmp -s - hello.out) || fail "hello.mjs on ${cpu%%:*} differs from the native run"
  done
else
  step "qemu-x86_64 is not installed: the prebuilt addon is not tried on emulated older CPUs"
fi
# TypeScript 7 (the repository's tsc) and 5.9 (docs/, typedoc's), which most consumers still use.
for tsc in "$ROOT/node_modules/.bin/tsc" "$ROOT/docs/node_modules/.bin/tsc"; do
  step "TypeScript consumer: tsc $("$tsc" --version | cut -d' ' -f2) --noEmit (NodeNext, strict)"
  "$tsc" --noEmit -p "$WORK/app/typescript/tsconfig.json"
done

# No compiler: PATH holds node, npm and a shell only, CXX unset.
NOCC="$WORK/nocc-bin"
mkdir -p "$NOCC"
for tool in node npm sh; do ln -s "$(command -v "$tool")" "$NOCC/$tool"; done
NOCC_ENV=(-u CXX -u REQUIRE_NATIVE PATH="$NOCC")
step "no C++ compiler: install, then the prebuilt addon"
new_app "$WORK/nocc"
install_app "$WORK/nocc" "${NOCC_ENV[@]}"
run_examples "$WORK/nocc" "${NOCC_ENV[@]}"
step "no C++ compiler and no prebuilt addon for this machine: the reference backend, with the reason"
rm -rf "$WORK/nocc/node_modules/@sparq/native/prebuilds"
(cd "$WORK/nocc" && env "${NOCC_ENV[@]}" npm rebuild @sparq/native --loglevel=error)
report="$(cd "$WORK/nocc" && env "${NOCC_ENV[@]}" ./node_modules/.bin/sparq backends)"
echo "$report"
grep -q '^native: unavailable (native addon not built: no C++ compiler found.*npm rebuild @sparq/native' <<<"$report" || fail "sparq backends does not say why native is unavailable and how to build it"
grep -q '^reference: active' <<<"$report" || fail "the reference backend is not active"
run_examples "$WORK/nocc" "${NOCC_ENV[@]}"
step "ok"
