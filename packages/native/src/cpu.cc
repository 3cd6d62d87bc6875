// Reads CPUID once. AVX2 needs the OS to save YMM state, AVX-512 ZMM state, AMX
// tile state (Linux grants AMX only after arch_prctl(ARCH_REQ_XCOMP_PERM)).
#include "cpu.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace sparq {
namespace {

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

KernelPath choose(const CpuFeatures& f) {
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  KernelPath best = avx512 ? KernelPath::avx512 : avx2 ? KernelPath::avx2 : KernelPath::scalar;
  // SPARQ_NATIVE_KERNEL=scalar|avx2|avx512 forces a narrower path (for tests and benchmarks).
  if (const char* want = std::getenv("SPARQ_NATIVE_KERNEL")) {
    if (std::strcmp(want, "scalar") == 0) return KernelPath::scalar;
    if (std::strcmp(want, "avx2") == 0 && avx2) return KernelPath::avx2;
    if (std::strcmp(want, "avx512") == 0 && avx512) return KernelPath::avx512;
  }
  return best;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

KernelPath kernel_path() {
  static const KernelPath path = choose(cpu_features());
  return path;
}

const char* kernel_path_name() {
  const CpuFeatures& f = cpu_features();
  switch (kernel_path()) {
    case KernelPath::scalar: return "scalar";
    case KernelPath::avx2: return "avx2";
    case KernelPath::avx512:
      if (f.avx512vnni && f.avx512bf16) return "avx512-vnni-bf16";
      return f.avx512vnni ? "avx512-vnni" : "avx512";
  }
  return "scalar";
}

}  // namespace sparq
