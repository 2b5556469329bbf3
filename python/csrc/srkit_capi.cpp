// The C ABI of python/csrc/srkit_capi.h over the kernel library: it converts
// the C structs to the kernels' own (kernels/common/adamw.h), builds the
// one-tensor segment table, and turns C++ exceptions into a per-thread message.
#include "python/csrc/srkit_capi.h"

#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "kernels/common/adamw.h"
#include "kernels/common/adamw_hyper.h"
#include "kernels/cpu/adamw.h"
#include "lib/precision.h"
#if defined(SRKIT_CAPI_CUDA)
#include "kernels/cuda/adamw.h"
#endif

namespace {

using namespace srkit;

thread_local std::string g_last_error;

// Runs f, mapping any exception to a non-zero return and its message.
template <typename F>
int guarded(F&& f) {
  try {
    f();
    g_last_error.clear();
    return 0;
  } catch (const std::exception& e) {
    g_last_error = e.what();
  } catch (...) {
    g_last_error = "unknown error";
  }
  return 1;
}

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(what);
}

DType to_dtype(int32_t d, const char* field) {
  if (d == 0) return DType::kF32;
  if (d == 1) return DType::kBF16;
  throw std::invalid_argument(std::string("rule.") + field + ": expected 0 (f32) or 1 (bf16)");
}

AdamWRule to_rule(const srkit_rule* r) {
  require(r != nullptr, "rule is null");
  AdamWRule out;
  out.weights = to_dtype(r->weights, "weights");
  out.grads = to_dtype(r->grads, "grads");
  require(r->master >= 0 && r->master <= 2, "rule.master: expected 0 (none), 1 (f32) or 2 (rem16)");
  out.master = MasterKind(r->master);
  out.m = to_dtype(r->m, "m");
  out.v = to_dtype(r->v, "v");
  out.weight_sr = r->weight_sr != 0;
  out.m_sr = r->m_sr != 0;
  out.v_sr = r->v_sr != 0;
  out.kahan = r->kahan != 0;
  return out;
}

srkit_rule from_rule(const AdamWRule& r) {
  return srkit_rule{int32_t(r.weights),
                    int32_t(r.grads),
                    int32_t(r.master),
                    int32_t(r.m),
                    int32_t(r.v),
                    r.weight_sr,
                    r.m_sr,
                    r.v_sr,
                    r.kahan};
}

AdamWHyper to_hyper(const srkit_hyper* h) {
  require(h != nullptr, "hyper is null");
  require(h->step >= 1, "hyper.step is 1-based");
  check_sr_step("hyper.step", h->step);
  AdamWHyper out{};
  out.lr = h->lr;
  out.beta1 = h->beta1;
  out.beta2 = h->beta2;
  out.eps = h->eps;
  out.weight_decay = h->weight_decay;
  out.bias_correction1 = adamw_bias_correction(h->beta1, h->step);
  out.bias_correction2 = adamw_bias_correction(h->beta2, h->step);
  out.grad_scale = h->grad_scale;
  out.seed = h->seed;
  out.step = h->step;
  return out;
}

AdamWBuffers to_buffers(const srkit_buffers* b) {
  require(b != nullptr, "buffers is null");
  return AdamWBuffers{b->weights, const_cast<void*>(b->grads), b->master, b->m, b->v, b->kahan};
}

// The kernels address global elements [offset, offset + count) through a
// segment table from element 0: the elements before the tensor (never
// touched) and the tensor itself.
std::vector<ParamSegment> tensor_segments(uint64_t offset, uint64_t count, int decay) {
  std::vector<ParamSegment> segs;
  if (offset > 0) segs.push_back(ParamSegment{0, size_t(offset), false});
  segs.push_back(ParamSegment{size_t(offset), size_t(count), decay != 0});
  return segs;
}

static_assert(sizeof(srkit_telemetry) == sizeof(AdamWTelemetry));
static_assert(offsetof(srkit_telemetry, v_stalled) == offsetof(AdamWTelemetry, v_stalled));

}  // namespace

extern "C" {

int srkit_capi_version(void) { return SRKIT_CAPI_VERSION; }

const char* srkit_last_error(void) { return g_last_error.c_str(); }

int srkit_strategy_parse(const char* spec, srkit_rule* rule, char* describe, size_t describe_len) {
  return guarded([&] {
    require(spec != nullptr && rule != nullptr, "spec and rule must not be null");
    const PrecisionStrategy s = strategy_from_string(spec);
    *rule = from_rule(s.rule);
    if (describe && describe_len > 0) {
      const std::string d = s.describe();
      const size_t n = std::min(d.size(), describe_len - 1);
      std::memcpy(describe, d.data(), n);
      describe[n] = '\0';
    }
  });
}

int srkit_adamw_step_cpu(const srkit_rule* rule, const srkit_buffers* buffers, uint64_t offset,
                         uint64_t count, int decay, const srkit_hyper* hyper,
                         srkit_telemetry* telemetry) {
  return guarded([&] {
    const std::vector<ParamSegment> segs = tensor_segments(offset, count, decay);
    cpu::adamw_step(to_rule(rule), to_buffers(buffers), segs.data(), segs.size(), offset,
                    offset + count, to_hyper(hyper), reinterpret_cast<AdamWTelemetry*>(telemetry));
  });
}

#if defined(SRKIT_CAPI_CUDA)
int srkit_has_cuda(void) { return 1; }

int srkit_adamw_cuda_plan_bytes(uint64_t offset, uint64_t count, int decay, uint64_t* bytes) {
  return guarded([&] {
    require(bytes != nullptr, "bytes is null");
    const std::vector<ParamSegment> segs = tensor_segments(offset, count, decay);
    *bytes = cuda::adamw_plan_bytes(segs.data(), segs.size(), offset, offset + count);
  });
}

int srkit_adamw_cuda_plan_image(uint64_t offset, uint64_t count, int decay, void* image,
                                uint64_t bytes) {
  return guarded([&] {
    const std::vector<ParamSegment> segs = tensor_segments(offset, count, decay);
    const std::vector<unsigned char> img =
        cuda::adamw_plan_image(segs.data(), segs.size(), offset, offset + count);
    require(image != nullptr && bytes == img.size(),
            "plan image: the buffer must hold exactly srkit_adamw_cuda_plan_bytes bytes");
    std::memcpy(image, img.data(), img.size());
  });
}

int srkit_adamw_step_cuda(const srkit_rule* rule, const srkit_buffers* buffers, uint64_t offset,
                          uint64_t count, int decay, const srkit_hyper* hyper, void* plan,
                          srkit_telemetry* telemetry, void* stream) {
  return guarded([&] {
    const AdamWRule r = to_rule(rule);
    const AdamWBuffers b = to_buffers(buffers);
    const std::vector<ParamSegment> segs = tensor_segments(offset, count, decay);
    adamw_check_call("srkit_adamw_step_cuda", r, b, segs.data(), segs.size(), offset,
                     offset + count, to_hyper(hyper));
    cuda::adamw_step(r, b, plan, offset, offset + count, to_hyper(hyper), nullptr,
                     reinterpret_cast<AdamWTelemetry*>(telemetry),
                     static_cast<cuda::Stream>(stream));
  });
}
#else
int srkit_has_cuda(void) { return 0; }

static int no_cuda() {
  g_last_error = "this srkit library was built without CUDA";
  return 1;
}

int srkit_adamw_cuda_plan_bytes(uint64_t, uint64_t, int, uint64_t*) { return no_cuda(); }
int srkit_adamw_cuda_plan_image(uint64_t, uint64_t, int, void*, uint64_t) { return no_cuda(); }
int srkit_adamw_step_cuda(const srkit_rule*, const srkit_buffers*, uint64_t, uint64_t, int,
                          const srkit_hyper*, void*, srkit_telemetry*, void*) {
  return no_cuda();
}
#endif

}  // extern "C"
