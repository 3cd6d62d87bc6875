// CPU feature detection and the kernel path chosen at run time.
#pragma once

namespace sparq {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;  // with OS permission granted
};

// The widest family of kernels this CPU (and the SPARQ_NATIVE_KERNEL override) allows.
enum class KernelPath { scalar, avx2, avx512 };

const CpuFeatures& cpu_features();
KernelPath kernel_path();
// 'scalar', 'avx2', 'avx512', 'avx512-vnni' or 'avx512-vnni-bf16': what runs.
const char* kernel_path_name();

}  // namespace sparq
