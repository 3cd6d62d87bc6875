// CPU feature detection and the kernel path chosen at run time.
#pragma once

// The architecture this build is for: x86-64 builds hold the AVX2 / AVX-512 / AMX kernels
// (the _avx2, _avx512, _amx files), arm64 builds the NEON ones (the _neon, _dotprod files).
// Every other architecture builds the scalar kernels alone.
#if defined(__x86_64__) || defined(__i386__)
#define SPARQ_X86 1
#else
#define SPARQ_X86 0
#endif
#if defined(__aarch64__)
#define SPARQ_ARM64 1
#else
#define SPARQ_ARM64 0
#endif

namespace sparq {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;  // with OS permission granted
  bool dotprod = false;  // arm64: SDOT / UDOT (Armv8.2 DotProd; every Apple M1 and later, Graviton 2 and later)
  bool amd = false;      // vendor AuthenticAMD: its hardware prefetchers want no software prefetch on streams (attention_kernels.h)
};

// The widest family of kernels this CPU (and the SPARQ_NATIVE_KERNEL override) allows.
// An x86-64 build runs scalar, avx2 or avx512; an arm64 build scalar or neon.
enum class KernelPath { scalar, avx2, avx512, neon };
// Every path, for the addon's path switch (those this build and CPU cannot run are refused).
constexpr KernelPath kAllKernelPaths[] = {KernelPath::scalar, KernelPath::avx2, KernelPath::avx512, KernelPath::neon};

const CpuFeatures& cpu_features();
// True when this CPU can run `path` (scalar always can).
bool path_supported(KernelPath path);
// The path every op dispatches on: one forced by force_kernel_path (tests),
// else the widest this CPU supports (narrowed by SPARQ_NATIVE_KERNEL).
KernelPath kernel_path();
// Forces `path` for every op, or restores the default with nullptr (tests and benchmarks only).
void force_kernel_path(const KernelPath* path);
// 'scalar', 'avx2', 'avx512' or 'neon'.
const char* path_name(KernelPath path);
// The path with the extensions its kernels use: 'avx512-vnni', 'avx512', 'avx2', 'neon-dotprod', 'neon' or 'scalar'.
const char* kernel_path_name();

}  // namespace sparq
