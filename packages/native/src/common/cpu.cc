// Reads the CPU's features once. x86: CPUID; AVX2 needs the OS to save YMM state, AVX-512 ZMM
// state, AMX tile state (Linux grants AMX only after arch_prctl(ARCH_REQ_XCOMP_PERM)). arm64: NEON
// is part of the base architecture; the dot-product instructions are asked of the OS (Linux's
// auxiliary vector, macOS's sysctl).
#include "common/cpu.h"

#if SPARQ_X86
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif SPARQ_ARM64 && defined(__linux__)
#include <sys/auxv.h>
#elif SPARQ_ARM64 && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace sparq {
namespace {

#if SPARQ_X86
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool request_amx_permission() {
  constexpr long ARCH_REQ_XCOMP_PERM = 0x1023;
  constexpr long XFEATURE_XTILEDATA = 18;
  return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  f.amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;  // "Auth" "enti" "cAMD"
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & bit_OSXSAVE;
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool ymm = (xcr0 & 0x6) == 0x6;
  const bool zmm = ymm && (xcr0 & 0xe0) == 0xe0;
  f.fma = ymm && (c & bit_FMA);
  f.f16c = ymm && (c & bit_F16C);
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = ymm && (b & bit_AVX2);
  f.avx512f = zmm && (b & bit_AVX512F);
  f.avx512bw = zmm && (b & bit_AVX512BW);
  f.avx512vl = zmm && (b & bit_AVX512VL);
  f.avx512dq = zmm && (b & bit_AVX512DQ);
  f.avx512vnni = zmm && (c & bit_AVX512VNNI);
  const bool amx_cpu = (d & (1u << 24)) && (xcr0 & (3ull << 17)) == (3ull << 17);
  if (amx_cpu && request_amx_permission()) {
    f.amx_tile = true;
    f.amx_bf16 = d & (1u << 22);
    f.amx_int8 = d & (1u << 25);
  }
  __cpuid_count(7, 1, a, b, c, d);
  f.avx512bf16 = zmm && (a & (1u << 5));
  return f;
}
#elif SPARQ_ARM64
CpuFeatures detect() {
  CpuFeatures f;
#if defined(__linux__)
  constexpr unsigned long kHwcapAsimdDp = 1ul << 20;  // HWCAP_ASIMDDP (asm/hwcap.h)
  f.dotprod = getauxval(AT_HWCAP) & kHwcapAsimdDp;
#elif defined(__APPLE__)
  int on = 0;
  size_t size = sizeof(on);
  f.dotprod = sysctlbyname("hw.optional.arm.FEAT_DotProd", &on, &size, nullptr, 0) == 0 && on;
#endif
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

KernelPath choose() {
  KernelPath best = path_supported(KernelPath::avx512) ? KernelPath::avx512
                    : path_supported(KernelPath::avx2) ? KernelPath::avx2
                    : path_supported(KernelPath::neon) ? KernelPath::neon
                                                       : KernelPath::scalar;
  // SPARQ_NATIVE_KERNEL=scalar|avx2|avx512|neon narrows the path (for comparisons): scalar is
  // narrower than any other, avx2 than avx512.
  if (const char* want = std::getenv("SPARQ_NATIVE_KERNEL")) {
    for (KernelPath p : kAllKernelPaths) {
      if (std::strcmp(want, path_name(p)) == 0 && path_supported(p) && p < best) best = p;
    }
  }
  return best;
}

// -1: no forced path; else a KernelPath value.
std::atomic<int> forced{-1};

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool path_supported(KernelPath path) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  switch (path) {
    case KernelPath::scalar: return true;
    case KernelPath::avx2: return SPARQ_X86 && avx2;
    case KernelPath::avx512: return SPARQ_X86 && avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
    case KernelPath::neon: return SPARQ_ARM64;  // Advanced SIMD is mandatory in AArch64
  }
  return false;
}

KernelPath kernel_path() {
  static const KernelPath detected = choose();
  const int f = forced.load(std::memory_order_relaxed);
  return f < 0 ? detected : static_cast<KernelPath>(f);
}

void force_kernel_path(const KernelPath* path) { forced.store(path ? static_cast<int>(*path) : -1); }

const char* path_name(KernelPath path) {
  switch (path) {
    case KernelPath::neon: return "neon";
    case KernelPath::avx512: return "avx512";
    case KernelPath::avx2: return "avx2";
    case KernelPath::scalar: return "scalar";
  }
  return "scalar";
}

const char* kernel_path_name() {
  // Names only what the kernels execute: AVX-512 VNNI drives the int8 INT4 path.
  // No kernel uses AVX-512 BF16 instructions (bf16 weights widen to f32 exactly
  // with a shift), so BF16 support is listed in info().features, not here.
  if (kernel_path() == KernelPath::avx512 && cpu_features().avx512vnni) return "avx512-vnni";
  if (kernel_path() == KernelPath::neon && cpu_features().dotprod) return "neon-dotprod";
  return path_name(kernel_path());
}

}  // namespace sparq
