// kvAppend (SPEC 4): N tokens written in place at nPast of one sequence: key rows,
// key columns (K transposed, 'k-twice' only), value rows, in the cache dtype (f16
// rounds to nearest even, as core's f32ToF16), and the f64 running sum of V from
// the stored (rounded) values, in token order, so vSum matches the reference bit for bit.
#include <cstring>
#include <vector>

#include "attention.h"

namespace sparq {

void kv_append(const CacheView& c, int64_t seq, const float* k, const float* v, int64_t n_tokens) {
  const AttnKernels& kt = attn_kernels();
  const size_t d = static_cast<size_t>(c.d);
  const int64_t start = c.npast[seq];
  std::vector<float> stored(d);
  for (int64_t t = 0; t < n_tokens; t++) {
    const int64_t pos = start + t;
    for (int64_t h = 0; h < c.nkv; h++) {
      const float* ksrc = k + (t * c.nkv + h) * c.d;
      const float* vsrc = v + (t * c.nkv + h) * c.d;
      const size_t row = static_cast<size_t>(((seq * c.nkv + h) * c.cap + pos) * c.d);
      const size_t col = static_cast<size_t>((seq * c.nkv + h) * c.d * c.cap + pos);  // + i * cap
      const float* vread = vsrc;
      if (c.f16) {
        uint16_t* krow = static_cast<uint16_t*>(c.k) + row;
        kt.to_f16(krow, ksrc, d);
        if (c.kT)
          for (size_t i = 0; i < d; i++) static_cast<uint16_t*>(c.kT)[col + i * c.cap] = krow[i];
        uint16_t* vrow = static_cast<uint16_t*>(c.v) + row;
        kt.to_f16(vrow, vsrc, d);
        kt.from_f16(stored.data(), vrow, d);
        vread = stored.data();
      } else {
        std::memcpy(static_cast<float*>(c.k) + row, ksrc, d * 4);
        if (c.kT)
          for (size_t i = 0; i < d; i++) static_cast<float*>(c.kT)[col + i * c.cap] = ksrc[i];
        std::memcpy(static_cast<float*>(c.v) + row, vsrc, d * 4);
      }
      // Padding is stored but masked, so it never enters the mean.
      if (pos >= c.npad[seq]) {
        double* sum = c.vsum + (seq * c.nkv + h) * c.d;
        for (size_t i = 0; i < d; i++) sum[i] += static_cast<double>(vread[i]);
      }
    }
  }
  c.npast[seq] = static_cast<int32_t>(start + n_tokens);
}

}  // namespace sparq
