// <immintrin.h> for the x86 SIMD files. GCC 12's AVX-512 headers build their
// "undefined" vectors by self-initialisation (`__m512 __Y = __Y;`), and
// -Wuninitialized then fires at every inlined intrinsic (GCC bug 105593, fixed
// in GCC 13). Only those two warnings are silenced, only in SIMD files.
#pragma once
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
