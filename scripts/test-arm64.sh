#!/usr/bin/env bash
# The linux-arm64 native addon, cross-compiled and tested under emulation on an x86-64 Linux:
#   1. builds the addon the release ships (prebuilds/linux-arm64, as `pnpm release:pack` does)
#      with Debian's aarch64 cross compiler (g++-aarch64-linux-gnu);
#   2. sets up Debian's arm64 Node in a private folder: its .deb files and their dependencies
#      fetched by apt-get download through a private apt state (the host's dpkg gains no
#      architecture) and unpacked with dpkg -x; Debian 13's Node 20.19, since Debian 12's arm64
#      Node (18.20) is older than sparq's and vitest's >= 20.19;
#   3. runs under qemu-aarch64 -L <that folder>, on an emulated CPU with the dot-product
#      instructions (qemu's max) and one without (Cortex-A72, Armv8.0): `sparq backends` (native
#      active: kernel neon-dotprod, then neon), greedy stories260K byte for byte against llama2.c's
#      text, and the conformance suite on the native backend (REQUIRE_NATIVE=1); on the Cortex-A72
#      only the suite whose kernels differ there (block-int8: the plain NEON integer sums).
# Under qemu-user a process the emulated node starts runs natively: the test runner keeps to
# worker threads (vitest --pool=threads), and vite's bundler loads its arm64 binding
# (@rolldown/binding-linux-arm64-gnu, fetched with npm pack into the same folder).
#
#   scripts/test-arm64.sh [vitest filters...]   (default: test/conformance; .ci/run names a bounded set)
#
# ARM64_CPUS: the emulated CPUs of `sparq backends` and the greedy text, as cpu:kernel (default
# "max:neon-dotprod cortex-a72:neon").
# ARM64_A72_SUITE: the suites run on the Cortex-A72 (default test/conformance/block-int8.spec.ts;
# empty: none, the A72 then runs `sparq backends` and the greedy text only).
# SPARQ_ARM64_ROOT: the folder (default ~/.cache/sparq-arm64); it is reused between runs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${SPARQ_ARM64_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/sparq-arm64}"
SYSROOT="$CACHE/root"
SHARED="$ROOT/../shared/models"
step() { echo "test-arm64: $*"; }
fail() { echo "test-arm64: FAIL: $*" >&2; exit 1; }
START=$SECONDS

# The host's tools: qemu-user and the cross compiler.
need=()
command -v qemu-aarch64 >/dev/null 2>&1 || need+=(qemu-user)
command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || need+=(g++-aarch64-linux-gnu)
if [ ${#need[@]} -gt 0 ]; then
  step "installing ${need[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Debian's arm64 Node with its libraries, once.
if [ ! -x "$SYSROOT/usr/bin/node" ]; then
  step "Debian's arm64 Node into $SYSROOT"
  APT="$CACHE/apt"
  rm -rf "$APT" "$SYSROOT"
  mkdir -p "$APT/state/lists/partial" "$APT/cache/archives/partial" "$APT/debs" "$SYSROOT"
  : > "$APT/state/status"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" > "$APT/sources.list"
  opts=(-o "Dir::State=$APT/state" -o "Dir::State::status=$APT/state/status" -o "Dir::Cache=$APT/cache"
        -o "Dir::Etc::SourceList=$APT/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o APT::Architecture=arm64 -o APT::Architectures::=arm64)
  apt-get "${opts[@]}" update -qq
  # nodejs and everything it depends on (virtual packages, in <>, are provided by real ones listed too).
  mapfile -t debs < <(apt-cache "${opts[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances nodejs | grep -v '^[ <]' | sort -u)
  (cd "$APT/debs" && apt-get "${opts[@]}" -qq download "${debs[@]}" 2>&1 | grep -v 'unsandboxed' || true)
  for deb in "$APT/debs"/*.deb; do dpkg -x "$deb" "$SYSROOT"; done
  # Debian 13 keeps /lib in /usr (a symlink base-files would make); the dynamic loader is looked up there.
  ln -sfn usr/lib "$SYSROOT/lib"
fi
NODE=(qemu-aarch64 -cpu max -L "$SYSROOT" "$SYSROOT/usr/bin/node")
NODE_A72=(qemu-aarch64 -cpu cortex-a72 -L "$SYSROOT" "$SYSROOT/usr/bin/node")
step "node $("${NODE[@]}" -p 'process.version + " " + process.arch')"

# vite's bundler binding for arm64, of the version the workspace installed.
ROLLDOWN_VERSION="$(node -p 'require(require("fs").realpathSync(process.argv[1]) + "/package.json").version' "$ROOT/node_modules/.pnpm/node_modules/rolldown")"
BINDING="$CACHE/rolldown-$ROLLDOWN_VERSION/package/rolldown-binding.linux-arm64-gnu.node"
if [ ! -f "$BINDING" ]; then
  step "@rolldown/binding-linux-arm64-gnu@$ROLLDOWN_VERSION"
  mkdir -p "$CACHE/rolldown-$ROLLDOWN_VERSION"
  (cd "$CACHE/rolldown-$ROLLDOWN_VERSION" && npm pack --silent "@rolldown/binding-linux-arm64-gnu@$ROLLDOWN_VERSION" >/dev/null && tar xzf ./*.tgz)
fi

step "the shipped addon: build.mjs --prebuilt --arch arm64"
t0=$SECONDS
node "$ROOT/packages/native/scripts/build.mjs" --prebuilt --strict --arch arm64 2>&1 | grep -v '^@sparq/native: compiling' || true
[ -f "$ROOT/packages/native/prebuilds/linux-arm64/node.napi.glibc.node" ] || fail "no prebuilds/linux-arm64 addon"
echo "  built in $((SECONDS - t0)) s"
# A build folder with no addon of its own: the loader takes ../prebuilds/linux-arm64 (the release's path).
export SPARQ_NATIVE_BUILD="$ROOT/packages/native/build-prebuilt-only"
export NAPI_RS_NATIVE_LIBRARY_PATH="$BINDING" REQUIRE_NATIVE=1
cd "$ROOT"

[ -f packages/sparq/dist/index.js ] || pnpm -s build
for cpu in ${ARM64_CPUS:-max:neon-dotprod cortex-a72:neon}; do
  qemu=(qemu-aarch64 -cpu "${cpu%%:*}" -L "$SYSROOT" "$SYSROOT/usr/bin/node")
  step "sparq backends on an emulated ${cpu%%:*} CPU"
  report="$("${qemu[@]}" packages/sparq/bin/sparq.js backends)"
  echo "$report"
  grep -q "^native: active (kernel ${cpu##*:}," <<<"$report" || fail "the native backend (${cpu##*:}) is not active on ${cpu%%:*}"
  if [ -f "$SHARED/stories260K.bin" ] && [ -f "$SHARED/stories260K_greedy200.txt" ]; then
    step "greedy stories260K on ${cpu%%:*}, 200 tokens, byte for byte (native backend)"
    SPARQ_BACKEND=native "${qemu[@]}" packages/sparq/bin/sparq.js generate --model "$SHARED/stories260K.bin" \
      --tokenizer "$SHARED/tok512.bin" -n 200 --temperature 0 2>/dev/null | cmp - "$SHARED/stories260K_greedy200.txt" \
      || fail "greedy text on ${cpu%%:*} differs from llama2.c's"
  elif [ "${CI:-}" = true ]; then
    fail "no $SHARED/stories260K.bin (CI needs ../shared)"
  else
    step "skipped greedy stories260K: no $SHARED/stories260K.bin"
  fi
done

A72_SUITE="${ARM64_A72_SUITE-test/conformance/block-int8.spec.ts}"
if [ -n "$A72_SUITE" ]; then
  step "vitest on cortex-a72: $A72_SUITE (threads pool)"
  t0=$SECONDS
  "${NODE_A72[@]}" node_modules/vitest/vitest.mjs run --pool=threads $A72_SUITE
  echo "  vitest under qemu-aarch64 -cpu cortex-a72: $((SECONDS - t0)) s"
fi

# ggml-oracle.spec runs llama.cpp's library through a C program of its own, a child process, which
# qemu-user would run as an x86-64 program against the arm64 library: it is left out here.
step "vitest on max: ${*:-test/conformance} (threads pool)"
t0=$SECONDS
"${NODE[@]}" node_modules/vitest/vitest.mjs run --pool=threads --exclude test/conformance/ggml-oracle.spec.ts "${@:-test/conformance}"
echo "  vitest under qemu-aarch64 -cpu max: $((SECONDS - t0)) s"
step "ok in $((SECONDS - START)) s"
