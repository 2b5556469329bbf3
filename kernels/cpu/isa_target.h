// Function attributes for kernels compiled for more than the build's x86-64-v3
// baseline, chosen at run time (kernels/cpu/cpu_isa.h): one definition of each
// target string, and of the warning GCC 12 raises inside such functions.
#pragma once

// AVX-512 F/BW/VL/DQ, as cpu_has_avx512() checks; GCC is also told to use 512-bit
// vectors when it vectorizes loops (its generic tuning prefers 256). Clang
// rejects that option in a target attribute and picks the width itself.
#if defined(__clang__)
#define SRKIT_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#else
#define SRKIT_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,prefer-vector-width=512")))
#endif

// AVX512_BF16 (VDPBF16PS) with the AVX-512 it builds on, as
// bf16_dot::cpu_supported() checks.
#define SRKIT_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// Around AVX-512 code: GCC 12's intrinsics start from _mm512_undefined_epi32(),
// a self-initialized variable that -W(maybe-)uninitialized reports once it is
// inlined into a function compiled through a target attribute (a false
// positive: the value is never read).
#if defined(__GNUC__) && !defined(__clang__)
#define SRKIT_AVX512_WARNINGS_BEGIN                                                    \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define SRKIT_AVX512_WARNINGS_END _Pragma("GCC diagnostic pop")
#else
#define SRKIT_AVX512_WARNINGS_BEGIN
#define SRKIT_AVX512_WARNINGS_END
#endif
