// Bindings of the attention ops.
#include "bindings.h"

namespace sparq {
void register_attention_ops(Napi::Env env, Napi::Object exports) {}
}  // namespace sparq
