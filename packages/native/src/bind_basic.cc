// Bindings of the basic ops.
#include "bindings.h"

namespace sparq {
void register_basic_ops(Napi::Env env, Napi::Object exports) {}
}  // namespace sparq
