// The basic ops' dispatchers run the kernel family of cpu.h's kernel_path().
#pragma once
#include "cpu.h"

namespace sparq {

// AVX-512 VNNI integer dot products are usable on the current path.
bool basic_vnni_enabled();

}  // namespace sparq
