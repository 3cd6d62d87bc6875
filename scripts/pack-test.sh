#!/usr/bin/env bash
# The release as a user gets it: `pnpm release:pack` writes release/sparq-<version>.tgz, and
# this script installs exactly that file with plain npm into an empty folder outside the
# workspace, with no C++ compiler on PATH, and checks:
#   - the install needs nothing else (npm --offline: no registry), compiles nothing, and its time;
#   - `npx sparq backends` shows the native backend active (the prebuilt linux-x64 addon), also
#     on emulated older CPUs (qemu-x86_64: baseline x86-64 runs the scalar kernels, Haswell AVX2);
#   - `npx sparq generate` prints llama2.c's greedy text byte for byte; `npx sparq playground`
#     serves the page and the model; every example runs under plain node; require('sparq'), 'sparq/llm' and 'sparq/core' work;
#   - a TypeScript consumer type-checks under moduleResolution node16, nodenext and bundler
#     (TypeScript 7, the repository's, and 5.9, docs/');
#   - with no prebuilt addon for the machine: the reference backend runs, and `sparq backends`
#     says why and names `sparq build-native`, which then compiles one (with the compiler back).
# The linux-arm64 addon in the same tarball is tested by scripts/test-arm64.sh.
#
#   scripts/pack-test.sh [MODEL]   (default ../shared/models/stories260K.bin)
#
# KEEP=1 keeps the temporary folder.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODEL="$(realpath "${1:-$ROOT/../shared/models/stories260K.bin}")"
TOKENIZER="$(dirname "$MODEL")/tok512.bin"
GREEDY="$(dirname "$MODEL")/stories260K_greedy200.txt"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sparq-pack-XXXXXX")"
SERVER=""
cleanup() {
  [ -z "$SERVER" ] || kill "$SERVER" 2>/dev/null || true
  [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
step() { echo "pack-test: $*"; }
fail() { echo "pack-test: FAIL: $*" >&2; exit 1; }
[ -f "$MODEL" ] || fail "no model at $MODEL"

cd "$ROOT"
step "pnpm release:pack"
pnpm -s release:pack
VERSION="$(node -p 'require("./packages/sparq/package.json").version')"
TGZ="$ROOT/release/sparq-$VERSION.tgz"
[ -f "$TGZ" ] || fail "no $TGZ"
echo "  $(basename "$TGZ"): $(du -k "$TGZ" | cut -f1) KiB, $(tar tzf "$TGZ" | wc -l) files"

# No compiler: PATH holds node, npm, npx and a shell only; CXX unset.
NOCC="$WORK/nocc-bin"
mkdir -p "$NOCC"
for tool in node npm npx sh; do ln -s "$(command -v "$tool")" "$NOCC/$tool"; done
NOCC_ENV=(-u CXX -u REQUIRE_NATIVE PATH="$NOCC")
APP="$WORK/app"
in_app() { (cd "$APP" && env "${NOCC_ENV[@]}" "$@"); }

step "npm i ./$(basename "$TGZ") in an empty folder, offline, no compiler"
mkdir -p "$APP"
cp "$TGZ" "$APP/"
echo '{ "name": "app", "private": true, "type": "module" }' > "$APP/package.json"
t0=$(date +%s%N)
in_app npm install --offline --no-audit --no-fund --loglevel=error "./$(basename "$TGZ")"
echo "  npm install: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
NATIVE="$APP/node_modules/sparq/node_modules/@sparq/native"
[ -d "$NATIVE/build" ] && fail "the install compiled something ($NATIVE/build exists)"
[ "$(ls "$APP/node_modules")" = sparq ] || fail "the install added packages besides sparq: $(ls "$APP/node_modules")"

step "npx sparq backends"
report="$(in_app npx sparq backends)"
echo "$report"
grep -q '^native: active' <<<"$report" || fail "native is not active with the prebuilt addon"
step "npx sparq backends under NODE_OPTIONS=--conditions=sparq-source (what a pnpm-run parent in the repository passes on)"
report="$(NODE_OPTIONS=--conditions=sparq-source in_app npx sparq backends 2>&1)" || fail "sparq backends exits $? under the source condition: $report"
grep -q '^native: active' <<<"$report" || fail "sparq backends under the source condition: $report"

run_examples() {
  in_app npx sparq --version
  in_app node -e 'const sparq = require("sparq"); if (typeof sparq.loadModel !== "function") process.exit(1)' || fail "require('sparq') does not give the API"
  in_app node -e 'const llm = require("sparq/llm"), core = require("sparq/core"); if (typeof llm.randomLlama !== "function" || typeof core.validateSparq !== "function") process.exit(1)' || fail "sparq/llm or sparq/core does not give the runtime's internals"
  in_app node hello.mjs "$MODEL" > "$APP/hello.out"
  grep -q . "$APP/hello.out" || fail "hello.mjs printed nothing"
  in_app node stream-abort.mjs "$MODEL" > /dev/null
  in_app node raw-sparq.mjs
  in_app node choose-backend.mjs "$MODEL"
  # The bin prints llama2.c's greedy text byte for byte.
  if [ -f "$TOKENIZER" ] && [ -f "$GREEDY" ]; then
    in_app npx sparq generate --model "$MODEL" --tokenizer "$TOKENIZER" -n 200 --temperature 0 2>/dev/null | cmp - "$GREEDY" || fail "sparq generate differs from llama2.c's output"
  fi
}

step "the examples with plain node, generate"
cp -r "$ROOT/examples/." "$APP/"
run_examples
cp "$APP/hello.out" "$WORK/hello.native.out"

step "npx sparq playground"
(cd "$APP" && exec env "${NOCC_ENV[@]}" npx sparq playground --model "$MODEL" --port 0 > "$WORK/playground.out" 2>&1) &
SERVER=$!
url=""
for _ in $(seq 1 100); do
  url="$(grep -o 'http://127.0.0.1:[0-9]*/' "$WORK/playground.out" | head -1 || true)"
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || fail "sparq playground printed no URL: $(cat "$WORK/playground.out")"
in_app node --input-type=module -e '
  const url = process.argv[1];
  const page = await (await fetch(url)).text();
  if (!page.includes("<html")) throw new Error("no page at " + url);
  const files = await (await fetch(url + "files.json")).json();
  const model = await fetch(url + "files/model");
  if (!model.ok || files.model !== process.argv[2]) throw new Error("the model is not served: " + JSON.stringify(files));
  console.log("  playground: page, files.json and the model served at " + url);
' "$url" "$(basename "$MODEL")"
kill "$SERVER"
wait "$SERVER" 2>/dev/null || true
# npx runs the bin as its child, which outlives npx: stop that server too.
pkill -f "$APP/node_modules/.bin/sparq playground" 2>/dev/null || true
SERVER=""

# The prebuilt addon on older CPUs (emulated): baseline x86-64 runs the scalar kernels, an AVX2-only CPU the AVX2 ones.
if command -v qemu-x86_64 >/dev/null 2>&1 && [ "$(uname -m)" = x86_64 ]; then
  for cpu in qemu64:scalar Haswell:avx2; do
    step "prebuilt addon on an emulated ${cpu%%:*} CPU"
    report="$(cd "$APP" && qemu-x86_64 -cpu "${cpu%%:*}" "$(command -v node)" node_modules/sparq/bin/sparq.js backends 2>/dev/null)"
    grep -q "^native: active (kernel ${cpu##*:}," <<<"$report" || fail "on ${cpu%%:*}: $report"
    (cd "$APP" && qemu-x86_64 -cpu "${cpu%%:*}" "$(command -v node)" hello.mjs "$MODEL" 2>/dev/null | cmp -s - "$WORK/hello.native.out") || fail "hello.mjs on ${cpu%%:*} differs from the native run"
  done
else
  step "qemu-x86_64 is not installed: the prebuilt addon is not tried on emulated older CPUs"
fi

# TypeScript 7 (the repository's tsc) and 5.9 (docs/, typedoc's), which most consumers still use.
step "TypeScript consumer: @types/node from the registry (the consumer's own dependency)"
(cd "$APP" && npm install --no-audit --no-fund --loglevel=error --no-save @types/node@^20)
for resolution in node16 nodenext bundler; do
  module=$resolution
  [ "$resolution" = bundler ] && module=esnext
  echo "{ \"extends\": \"./tsconfig.json\", \"compilerOptions\": { \"module\": \"$module\", \"moduleResolution\": \"$resolution\" } }" > "$APP/typescript/tsconfig.$resolution.json"
  for tsc in "$ROOT/node_modules/.bin/tsc" "$ROOT/docs/node_modules/.bin/tsc"; do
    step "TypeScript consumer: tsc $("$tsc" --version | cut -d' ' -f2) --noEmit, moduleResolution $resolution, strict"
    "$tsc" --noEmit -p "$APP/typescript/tsconfig.$resolution.json"
  done
done

step "no prebuilt addon for this machine: the reference backend, with the reason"
ARCH="$(node -p process.arch)"
mv "$NATIVE/prebuilds/linux-$ARCH" "$WORK/prebuilt-$ARCH"
report="$(in_app npx sparq backends)"
echo "$report"
grep -q "^native: unavailable (native addon not built on this machine; no prebuilt binary for linux-$ARCH (glibc) (the package has: $( [ "$ARCH" = x64 ] && echo linux-arm64 || echo linux-x64 ), glibc); to build it: npx sparq build-native" <<<"$report" || fail "sparq backends does not say why native is unavailable and how to build it"
grep -q '^reference: active' <<<"$report" || fail "the reference backend is not active"
run_examples
in_app npx sparq build-native 2> "$WORK/build-native.err" && fail "sparq build-native succeeded with no compiler"
grep -q 'no C++ compiler found' "$WORK/build-native.err" || fail "sparq build-native does not say the compiler is missing: $(cat "$WORK/build-native.err")"

step "sparq build-native with the system compiler"
(cd "$APP" && npx sparq build-native 2>&1 | grep -v '^@sparq/native: compiling')
report="$(cd "$APP" && npx sparq backends)"
echo "$report"
grep -q '^native: active' <<<"$report" || fail "native is not active after sparq build-native"
(cd "$APP" && node hello.mjs "$MODEL" 2>/dev/null | cmp -s - "$WORK/hello.native.out") || fail "hello.mjs on the addon built here differs from the prebuilt one's"
step "ok"
