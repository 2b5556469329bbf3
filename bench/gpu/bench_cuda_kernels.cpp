// The CUDA kernels (kernels/cuda/cast.h, kernels/cuda/adamw.h, and the model
// ops of pointwise.h, encoder.h, layernorm.h, loss.h, reduce.h, column_sums.h)
// against a cudaMemcpy device-to-device moving the same bytes, on the current
// GPU.
// bytes_per_second counts reads plus writes: 6 bytes/element for each cast
// (fp32 read + bf16 written, or the reverse); for AdamW the bytes the strategy
// must move per parameter (adamw_traffic_bytes, spelled out in the label); for
// a model op the bytes it must read and write at least, at GPT-2 124M's shapes
// (B*T = 8192 rows, C = 768, V = 50257 padded to 50304).
// vs_memcpy is the kernel's rate over a cudaMemcpy of half those bytes (a copy
// reads and writes each byte), timed with CUDA events just before the
// benchmark. Without a usable device it prints why and exits 0.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/common/adamw.h"
#include "kernels/common/bf16.h"
#include "kernels/common/sr_bits.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/compat.cuh"
#include "kernels/cuda/device.h"
#include "kernels/cuda/encoder.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/pointwise.h"
#include "kernels/cuda/reduce.h"
#include "lib/precision.h"

namespace {

using srkit::bf16;
namespace cuda = srkit::cuda;

constexpr size_t kSizes[] = {size_t(1) << 20, size_t(16) << 20, size_t(64) << 20,
                             size_t(256) << 20};

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : p_(bytes ? cuda::device_malloc(bytes) : nullptr) {}
  ~DeviceBuffer() {
    if (p_) cuda::device_free(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }

 private:
  void* p_;
};

// splitmix64 of i as a float in [-1, 1).
float unit(uint64_t i) {
  uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(int32_t(uint32_t(z))) * (1.0f / 2147483648.0f);
}

// Fills n elements of dtype t with scale * unit(i + salt) (squared when
// `square`, for the second moment). Only the first 1M elements are made on the
// host; the rest repeat them by device-to-device copies, so that filling the
// 256M-element cases (which Google Benchmark sets up several times while it
// sizes a run) costs milliseconds, not seconds of one host thread.
void fill(void* dst, srkit::DType t, size_t n, float scale, uint64_t salt, bool square = false) {
  if (!dst) return;
  constexpr size_t kPattern = size_t(1) << 20;
  const size_t es = srkit::dtype_size(t);
  const size_t len = std::min(n, kPattern);
  std::vector<float> f(len);
  for (size_t i = 0; i < len; ++i) {
    const float x = scale * unit(i + salt);
    f[i] = square ? x * x : x;
  }
  if (t == srkit::DType::kF32) {
    cuda::copy_to_device(dst, f.data(), len * es);
  } else {
    std::vector<bf16> h(len);
    for (size_t i = 0; i < len; ++i) h[i] = srkit::float_to_bf16_rn(f[i]);
    cuda::copy_to_device(dst, h.data(), len * es);
  }
  char* d = static_cast<char*>(dst);
  // Doubling copies: [0, done) is filled; copy as much of it as fits after it.
  for (size_t done = len; done < n;) {
    const size_t count = std::min(done, n - done);
    cuda::check(cudaMemcpy(d + done * es, d, count * es, cudaMemcpyDeviceToDevice),
                "cudaMemcpy D2D (fill)");
    done += count;
  }
}

// Wall time of fn() on the default stream, by CUDA events.
template <typename F>
double time_on_device(F&& fn) {
  cudaEvent_t start, stop;
  cuda::check(cudaEventCreate(&start), "cudaEventCreate");
  cuda::check(cudaEventCreate(&stop), "cudaEventCreate");
  cuda::check(cudaEventRecord(start), "cudaEventRecord");
  fn();
  cuda::check(cudaEventRecord(stop), "cudaEventRecord");
  cuda::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0.0f;
  cuda::check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return double(ms) * 1e-3;
}

// Median seconds of 5 device-to-device copies of `bytes`.
double memcpy_seconds(size_t bytes) {
  DeviceBuffer a(bytes), b(bytes);
  cuda::check(cudaMemcpy(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy D2D");
  std::vector<double> s;
  for (int r = 0; r < 5; ++r) {
    s.push_back(time_on_device([&] {
      cuda::check(cudaMemcpy(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy D2D");
    }));
  }
  std::sort(s.begin(), s.end());
  return s[2];
}

// Times fn per iteration (manual time) and sets the traffic counters.
template <typename F>
void run_timed(benchmark::State& state, size_t traffic_bytes, F&& fn) {
  const double copy_s = memcpy_seconds(traffic_bytes / 2);
  fn();  // warm-up: first launch, page mapping
  cuda::synchronize();
  double total = 0.0;
  for (auto _ : state) {
    const double s = time_on_device(fn);
    state.SetIterationTime(s);
    total += s;
  }
  const double per_iter = total / double(state.iterations());
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(traffic_bytes));
  state.counters["vs_memcpy"] = copy_s / per_iter;
}

void bm_memcpy(benchmark::State& state, size_t bytes) {
  DeviceBuffer a(bytes), b(bytes);
  run_timed(state, 2 * bytes, [&] {
    cuda::check(cudaMemcpy(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy D2D");
  });
}

enum class CastKind { kRn, kSr, kWiden };

void bm_cast(benchmark::State& state, CastKind kind, size_t n) {
  DeviceBuffer f32(n * 4), b16(n * 2);
  fill(f32.get(), srkit::DType::kF32, n, 1.0f, 0);
  fill(b16.get(), srkit::DType::kBF16, n, 1.0f, 1ull << 40);
  auto* f = static_cast<float*>(f32.get());
  auto* b = static_cast<bf16*>(b16.get());
  run_timed(state, 6 * n, [&] {
    switch (kind) {
      case CastKind::kRn:
        cuda::cast_f32_to_bf16_rn(f, b, n, nullptr);
        break;
      case CastKind::kSr:
        cuda::cast_f32_to_bf16_sr(f, b, n, /*seed=*/1234, srkit::RngPurpose::kCast,
                                  /*step=*/1, /*base_index=*/0, nullptr);
        break;
      case CastKind::kWiden:
        cuda::cast_bf16_to_f32(b, f, n, nullptr);
        break;
    }
  });
}

// "r: w2 g2 m4 v4 | w: w2 m4 v4 = 22 B/param" for a rule.
std::string traffic_label(const srkit::AdamWRule& r) {
  const srkit::AdamWArrayBytes b = srkit::adamw_array_bytes(r);
  auto item = [](const char* name, size_t bytes) {
    std::string s;
    if (bytes) {
      s += ' ';
      s += name;
      s += std::to_string(bytes);
    }
    return s;
  };
  const size_t w_read = r.master == srkit::MasterKind::kF32 ? 0 : b.weights;
  return "r:" + item("w", w_read) + item("g", b.grads) + item("master", b.master) + item("m", b.m) +
         item("v", b.v) + item("kahan", b.kahan) + " | w:" + item("w", b.weights) +
         item("master", b.master) + item("m", b.m) + item("v", b.v) + item("kahan", b.kahan) +
         " = " + std::to_string(srkit::adamw_traffic_bytes(r)) + " B/param";
}

void bm_adamw(benchmark::State& state, const std::string& strategy, size_t n) {
  const srkit::AdamWRule rule = srkit::strategy_from_string(strategy).rule;
  const srkit::AdamWArrayBytes b = srkit::adamw_array_bytes(rule);
  DeviceBuffer w(b.weights * n), g(b.grads * n), master(b.master * n), m(b.m * n), v(b.v * n),
      kahan(b.kahan * n);
  fill(w.get(), rule.weights, n, 0.02f, 0);
  fill(g.get(), rule.grads, n, 1e-3f, 1ull << 40);
  fill(m.get(), rule.m, n, 1e-4f, 2ull << 40);
  fill(v.get(), rule.v, n, 1e-3f, 3ull << 40, /*square=*/true);
  if (master.get()) {
    // f32 master: GPT-2-like values; rem16: a zero remainder (weight == master).
    if (rule.master == srkit::MasterKind::kF32) {
      fill(master.get(), srkit::DType::kF32, n, 0.02f, 0);
    } else {
      cuda::check(cudaMemset(master.get(), 0, b.master * n), "cudaMemset");
    }
  }
  if (kahan.get()) cuda::check(cudaMemset(kahan.get(), 0, b.kahan * n), "cudaMemset");
  const srkit::AdamWBuffers buffers{w.get(), g.get(), master.get(), m.get(), v.get(), kahan.get()};
  const srkit::ParamSegment segment{0, n, true};
  // The plan is built once, as the backend does (prepare_adamw).
  const std::vector<unsigned char> image = cuda::adamw_plan_image(&segment, 1, 0, n);
  DeviceBuffer plan(image.size());
  cuda::copy_to_device(plan.get(), image.data(), image.size());
  srkit::AdamWHyper h{};
  h.lr = 1e-3f;
  h.beta1 = 0.9f;
  h.beta2 = 0.95f;
  h.eps = 1e-8f;
  h.weight_decay = 0.1f;
  h.bias_correction1 = 1.0f - 0.9f;
  h.bias_correction2 = 1.0f - 0.95f;
  h.grad_scale = 1.0f;
  h.seed = 1337;
  uint64_t step = 0;
  state.SetLabel(traffic_label(rule));
  run_timed(state, srkit::adamw_traffic_bytes(rule) * n, [&] {
    h.step = ++step;
    cuda::adamw_step(rule, buffers, plan.get(), 0, n, h, nullptr, nullptr, nullptr);
  });
}

// ---- model ops at GPT-2 124M's shapes ----
constexpr int kBatch = 8, kSeq = 1024, kRows = kBatch * kSeq, kC = 768, kV = 50257, kVp = 50304;

enum class ModelOp {
  kGeluForward,
  kGeluBackward,  // overwrite: read inp, dout; write dinp
  kResidualLayernorm,
  kLayernormBackward,
  kEncoderBackward,
  kClassifier,
  kSumSquares,
  kBiasGradient,   // column_sums of an [N, C] dout (attention and MLP projections)
  kBiasGradientFc  // of an [N, 4C] dout (the MLP's first layer)
};

void bm_model_op(benchmark::State& state, ModelOp op, srkit::DType dt) {
  const size_t es = srkit::dtype_size(dt);
  const size_t n = size_t(kRows) * kC;
  switch (op) {
    case ModelOp::kGeluForward: {  // the MLP's 4C activations: read, write
      const size_t m = 4 * n;
      DeviceBuffer in(m * es), out(m * es);
      fill(in.get(), dt, m, 3.0f, 0);
      run_timed(state, 2 * m * es,
                [&] { cuda::gelu_forward(dt, out.get(), in.get(), m, nullptr); });
      break;
    }
    case ModelOp::kGeluBackward: {
      const size_t m = 4 * n;
      DeviceBuffer in(m * es), dout(m * es), dinp(m * es);
      fill(in.get(), dt, m, 3.0f, 0);
      fill(dout.get(), dt, m, 1e-3f, 1ull << 40);
      run_timed(state, 3 * m * es, [&] {
        cuda::gelu_backward(dt, dinp.get(), srkit::GradWrite::kOverwrite, in.get(), dout.get(), m,
                            nullptr);
      });
      break;
    }
    case ModelOp::kResidualLayernorm: {  // read a, b; write residual, ln (+ the row statistics)
      DeviceBuffer a(n * es), b(n * es), res(n * es), ln(n * es), w(kC * es), bias(kC * es),
          stats(2 * size_t(kRows) * 4);
      fill(a.get(), dt, n, 1.0f, 0);
      fill(b.get(), dt, n, 1.0f, 1ull << 40);
      fill(w.get(), dt, kC, 1.0f, 2ull << 40);
      fill(bias.get(), dt, kC, 0.1f, 3ull << 40);
      auto* mean = static_cast<float*>(stats.get());
      run_timed(state, 4 * n * es + 2 * size_t(kRows) * 4, [&] {
        cuda::residual_layernorm_forward(dt, res.get(), ln.get(), mean, mean + kRows, a.get(),
                                         b.get(), w.get(), bias.get(), kRows, kC, nullptr);
      });
      break;
    }
    case ModelOp::kLayernormBackward: {  // read dout, inp; write dinp (overwrite)
      DeviceBuffer x(n * es), g(n * es), dx(n * es), w(kC * es), bias(kC * es), dw(kC * es),
          db(kC * es), stats(2 * size_t(kRows) * 4), out(n * es),
          scratch(cuda::layernorm_backward_scratch_bytes(kRows, kC));
      fill(x.get(), dt, n, 1.0f, 0);
      fill(g.get(), dt, n, 1.0f, 1ull << 40);
      fill(w.get(), dt, kC, 1.0f, 2ull << 40);
      fill(bias.get(), dt, kC, 0.1f, 3ull << 40);
      auto* mean = static_cast<float*>(stats.get());
      cuda::layernorm_forward(dt, out.get(), mean, mean + kRows, x.get(), w.get(), bias.get(),
                              kRows, kC, nullptr);
      run_timed(state, 3 * n * es, [&] {
        cuda::layernorm_backward(dt, dt, dx.get(), srkit::GradWrite::kOverwrite, dw.get(), db.get(),
                                 srkit::GradWrite::kAccumulate, g.get(), x.get(), w.get(), mean,
                                 mean + kRows, kRows, kC, scratch.get(), nullptr);
      });
      break;
    }
    case ModelOp::kEncoderBackward: {  // read dout; read and write dwpe and the touched dwte rows
      std::vector<int32_t> tokens(kRows);
      for (int p = 0; p < kRows; ++p) tokens[p] = int32_t(uint64_t(unit(p) * 1e6f + 2e6f) % kV);
      cuda::EncoderBackwardPlan plan;
      plan.build(tokens.data(), kRows);
      DeviceBuffer dout(n * es), dwte(size_t(kV) * kC * es), dwpe(size_t(kSeq) * kC * es),
          device_plan(plan.packed_bytes());
      fill(dout.get(), dt, n, 1.0f, 0);
      cuda::copy_to_device(device_plan.get(), plan.packed(), plan.packed_bytes());
      const size_t rows_touched = size_t(kSeq) + size_t(plan.groups());
      run_timed(state, (n + 2 * rows_touched * kC) * es, [&] {
        cuda::encoder_backward(dt, dt, dwte.get(), dwpe.get(), dout.get(), device_plan.get(),
                               plan.groups(), kBatch, kSeq, kC, nullptr);
      });
      state.counters["groups"] = plan.groups();
      break;
    }
    case ModelOp::kClassifier: {  // read the logits, write dlogits in place (+ losses)
      const size_t m = size_t(kRows) * kVp;
      std::vector<int32_t> targets(kRows);
      for (int p = 0; p < kRows; ++p) targets[p] = int32_t((uint64_t(p) * 7919) % kV);
      DeviceBuffer logits(m * es), tg(kRows * sizeof(int32_t)), losses(kRows * sizeof(float));
      fill(logits.get(), dt, m, 4.0f, 0);
      cuda::copy_to_device(tg.get(), targets.data(), targets.size() * sizeof(int32_t));
      run_timed(state, 2 * m * es, [&] {
        cuda::classifier(dt, logits.get(), static_cast<float*>(losses.get()),
                         static_cast<const int32_t*>(tg.get()), 1.0f / kRows, kRows, kV, kVp,
                         nullptr);
      });
      break;
    }
    case ModelOp::kBiasGradient:
    case ModelOp::kBiasGradientFc: {  // read dout; read and write dbias
      const int oc = op == ModelOp::kBiasGradient ? kC : 4 * kC;
      const size_t m = size_t(kRows) * size_t(oc);
      DeviceBuffer g(m * es), db(size_t(oc) * es),
          scratch(cuda::column_sums_scratch_bytes(kRows, oc));
      fill(g.get(), dt, m, 1.0f, 0);
      fill(db.get(), dt, size_t(oc), 1.0f, 1ull << 40);
      run_timed(state, (m + 2 * size_t(oc)) * es, [&] {
        cuda::column_sums(dt, dt, db.get(), g.get(), kRows, oc, srkit::GradWrite::kAccumulate,
                          scratch.get(), nullptr);
      });
      break;
    }
    case ModelOp::kSumSquares: {  // the gradient norm of 124M parameters: read them
      const size_t m = size_t(124) << 20;
      DeviceBuffer x(m * es), out(sizeof(double)), scratch(cuda::sum_squares_scratch_bytes(m));
      fill(x.get(), dt, m, 1e-2f, 0);
      run_timed(state, m * es, [&] {
        cuda::sum_squares(dt, x.get(), m, static_cast<double*>(out.get()), scratch.get(), nullptr);
      });
      break;
    }
  }
}

std::string size_name(size_t n) { return std::to_string(n >> 20) + "M"; }

void register_all() {
  for (size_t n : kSizes) {
    benchmark::RegisterBenchmark(("memcpy_d2d/" + size_name(n) + "x6B").c_str(), bm_memcpy, 3 * n)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    const std::pair<const char*, CastKind> casts[] = {{"cast_f32_to_bf16_rn", CastKind::kRn},
                                                      {"cast_f32_to_bf16_sr", CastKind::kSr},
                                                      {"cast_bf16_to_f32", CastKind::kWiden}};
    for (const auto& [name, kind] : casts) {
      benchmark::RegisterBenchmark((std::string(name) + "/" + size_name(n)).c_str(), bm_cast, kind,
                                   n)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  const std::pair<const char*, ModelOp> model_ops[] = {
      {"gelu_forward", ModelOp::kGeluForward},
      {"gelu_backward", ModelOp::kGeluBackward},
      {"residual_layernorm_forward", ModelOp::kResidualLayernorm},
      {"layernorm_backward", ModelOp::kLayernormBackward},
      {"encoder_backward", ModelOp::kEncoderBackward},
      {"classifier", ModelOp::kClassifier},
      {"sum_squares", ModelOp::kSumSquares},
      {"bias_gradient", ModelOp::kBiasGradient},
      {"bias_gradient_4c", ModelOp::kBiasGradientFc}};
  for (const auto& [name, op] : model_ops) {
    for (srkit::DType dt : {srkit::DType::kBF16, srkit::DType::kF32}) {
      benchmark::RegisterBenchmark((std::string(name) + "/" + srkit::dtype_name(dt)).c_str(),
                                   bm_model_op, op, dt)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (const std::string& s : srkit::strategy_preset_names()) {
    for (size_t n : kSizes) {
      benchmark::RegisterBenchmark(("adamw/" + s + "/" + size_name(n)).c_str(), bm_adamw, s, n)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string reason;
  if (!cuda::device_available(&reason)) {
    std::printf("bench_cuda_kernels: skipped: %s\n", reason.c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  std::printf("device: %s\n", cuda::device_description().c_str());
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
