/* The C ABI of srkit's fused AdamW step (libsrkit_capi.so), for callers in
 * other languages: the Python package (python/srkit) loads it with ctypes, so
 * it needs no build against any framework's headers. docs/python.md describes
 * the package; docs/architecture.md, "The random-bits contract", the bits.
 *
 * Every function returns 0 on success; on failure it returns non-zero and
 * srkit_last_error() (per thread) holds a one-line message. */
#ifndef SRKIT_CAPI_H
#define SRKIT_CAPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SRKIT_CAPI_VERSION 1

/* The library is built with hidden visibility: only these functions are exported. */
#define SRKIT_CAPI_EXPORT __attribute__((visibility("default")))

/* A precision strategy's AdamW rule. dtypes: 0 = f32, 1 = bf16; master: 0 =
 * none, 1 = f32, 2 = rem16 (a signed 16-bit remainder: int16 storage). */
typedef struct {
  int32_t weights, grads, master, m, v;
  int32_t weight_sr, m_sr, v_sr, kahan;
} srkit_rule;

/* One step's hyper-parameters; the bias corrections 1 - beta^step are derived
 * from step exactly as sr-train derives them. step is 1-based and < 2^48. */
typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
  float grad_scale; /* multiplies every gradient (1: none) */
  uint64_t seed, step;
} srkit_hyper;

/* Arrays of one tensor (or shard), element 0 first; NULL where the rule has
 * none. master is float (f32) or int16 (rem16); kahan is bf16. */
typedef struct {
  void* weights;
  const void* grads;
  void* master;
  void* m;
  void* v;
  void* kahan;
} srkit_buffers;

/* The step's rounding telemetry: sums over the elements stepped. */
typedef struct {
  double update_sq, weight_sq;
  uint64_t n, nonzero, erased, m_stalled, v_stalled;
} srkit_telemetry;

SRKIT_CAPI_EXPORT int srkit_capi_version(void);
SRKIT_CAPI_EXPORT const char* srkit_last_error(void);

/* Parses a strategy in the grammar of sr-train --strategy into *rule, and its
 * one-line description into describe (describe_len bytes, NUL-terminated). */
SRKIT_CAPI_EXPORT int srkit_strategy_parse(const char* spec, srkit_rule* rule, char* describe,
                                           size_t describe_len);

/* One AdamW step, in place, over `count` elements of one tensor whose element
 * 0 is global element `offset` of the random-bits contract: a shard of a
 * tensor passes its own slices and the global offset of its first element.
 * decay: whether weight decay applies. telemetry: NULL, or filled. */
SRKIT_CAPI_EXPORT int srkit_adamw_step_cpu(const srkit_rule* rule, const srkit_buffers* buffers,
                                           uint64_t offset, uint64_t count, int decay,
                                           const srkit_hyper* hyper, srkit_telemetry* telemetry);

/* 1 when this library was built with the CUDA kernels, else 0. */
SRKIT_CAPI_EXPORT int srkit_has_cuda(void);

/* The CUDA step's plan of a tensor: *bytes of device memory the caller
 * allocates once, filled once from the host image srkit_adamw_cuda_plan_image
 * writes (exactly *bytes bytes). */
SRKIT_CAPI_EXPORT int srkit_adamw_cuda_plan_bytes(uint64_t offset, uint64_t count, int decay,
                                                  uint64_t* bytes);
SRKIT_CAPI_EXPORT int srkit_adamw_cuda_plan_image(uint64_t offset, uint64_t count, int decay,
                                                  void* image, uint64_t bytes);

/* The CUDA step, queued on `stream` (a cudaStream_t; NULL: the default
 * stream); buffers, plan and telemetry (nullable) are device pointers. Never
 * waits for the device. */
SRKIT_CAPI_EXPORT int srkit_adamw_step_cuda(const srkit_rule* rule, const srkit_buffers* buffers,
                                            uint64_t offset, uint64_t count, int decay,
                                            const srkit_hyper* hyper, void* plan,
                                            srkit_telemetry* telemetry, void* stream);

#ifdef __cplusplus
}
#endif

#endif
