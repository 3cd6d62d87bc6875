// Which kernel family the basic ops run: cpu.h's kernel_path(), unless a test
// forced a narrower one with force_basic_kernel_path (binding forceKernelPath).
#pragma once
#include "cpu.h"

namespace sparq {

KernelPath basic_kernel_path();
// True when this CPU can run `path` (scalar always can).
bool basic_path_supported(KernelPath path);
// Forces `path` for the basic ops (tests only); nullptr-like reset with `reset = true`.
void force_basic_kernel_path(KernelPath path, bool reset);
// AVX-512 VNNI integer dot products are usable on the current path.
bool basic_vnni_enabled();

}  // namespace sparq
