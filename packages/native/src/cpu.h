// CPU feature detection and the kernel path chosen at run time.
#pragma once

namespace sparq {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;  // with OS permission granted
  bool amd = false;  // vendor AuthenticAMD: its hardware prefetchers want no software prefetch on streams (attention_kernels.h)
};

// The widest family of kernels this CPU (and the SPARQ_NATIVE_KERNEL override) allows.
enum class KernelPath { scalar, avx2, avx512 };

const CpuFeatures& cpu_features();
// True when this CPU can run `path` (scalar always can).
bool path_supported(KernelPath path);
// The path every op dispatches on: one forced by force_kernel_path (tests),
// else the widest this CPU supports (narrowed by SPARQ_NATIVE_KERNEL).
KernelPath kernel_path();
// Forces `path` for every op, or restores the default with nullptr (tests and benchmarks only).
void force_kernel_path(const KernelPath* path);
// 'scalar', 'avx2' or 'avx512'.
const char* path_name(KernelPath path);
// The path with the extensions its kernels use: 'avx512-vnni', 'avx512', 'avx2' or 'scalar'.
const char* kernel_path_name();

}  // namespace sparq
