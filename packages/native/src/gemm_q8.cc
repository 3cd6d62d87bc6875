// Activation quantization of the integer prefill product (gemm_q8.h): scalar,
// once per call, with the INT4 'int8' path's group quantizer (32-element groups).
#include "gemm_q8.h"

#include <cstddef>

#include "int4.h"

namespace sparq {

void size_q8_acts(int64_t n, int64_t cols, Q8Acts& a) {
  a.n = n;
  a.cols = cols;
  a.q.resize(static_cast<size_t>(n * cols));
  a.d.resize(static_cast<size_t>(n * (cols / QK)));
  a.ds.resize(a.d.size());
  a.corr.resize(a.d.size());
}

void quantize_q8_acts(const float* x, int64_t t_begin, int64_t t_end, int off, Q8Acts& a) {
  const int64_t cols = a.cols, blocks = cols / QK;
  for (int64_t t = t_begin; t < t_end; ++t) {
    for (int64_t b = 0; b < blocks; ++b) {
      int32_t sum = 0;
      const float d = quantize_int8_group(x + t * cols + b * QK, QK, a.q.data() + t * cols + b * QK, sum);
      a.d[t * blocks + b] = d;
      a.ds[t * blocks + b] = d * static_cast<float>(sum);
      a.corr[t * blocks + b] = -off * sum;
    }
  }
}

}  // namespace sparq
