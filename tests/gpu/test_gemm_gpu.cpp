// The cuBLASLt GEMM wrapper (kernels/cuda/gemm.h) beyond what the backend
// conformance suite covers: the row-major -> column-major mapping of every
// transpose of the batched product (leading dimensions above the row length,
// batch strides with gaps, alpha and beta, each type combination attention
// uses); pointers less aligned than cuBLASLt's default (slices of a larger
// buffer) and a bias too little aligned for the epilogue, which must give the
// same results as aligned ones; the bias gradient over several row chunks, and
// column_sums (the bias gradient's kernels) bit for bit against their stated
// order at every width and alignment; and run-to-run determinism. The reference adds the fp32
// products in k order, which is the emulated cuBLASLt's order, so the emulation must match it bit
// for bit; a GPU within a few fp32 ulps of the magnitude sum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/dtype.h"
#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/gemm.h"

namespace srkit {
namespace {

// Values exact in bf16, in [-4, 4).
std::vector<float> values(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = float(int32_t(s >> 40) % 4096) / 1024.0f;
  }
  return v;
}

float round_to(DType t, float x) {
  return t == DType::kF32 ? x : bf16_to_float(float_to_bf16_rn(x));
}

// A device buffer holding floats stored as dt, at `offset` elements past a
// 256-byte aligned allocation (offset > 0: a slice less aligned than cuBLASLt's
// default).
class Buf {
 public:
  Buf(DType dt, const std::vector<float>& host, size_t offset = 0)
      : dt_(dt), n_(host.size()), offset_(offset) {
    base_ = cuda::device_malloc((n_ + offset_ + 1) * dtype_size(dt_));
    upload(host);
  }
  ~Buf() { cuda::device_free(base_); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  void* get() const { return static_cast<char*>(base_) + offset_ * dtype_size(dt_); }
  void upload(const std::vector<float>& host) {
    std::vector<uint8_t> bytes(n_ * dtype_size(dt_));
    for (size_t i = 0; i < n_; ++i) {
      if (dt_ == DType::kF32) {
        std::memcpy(&bytes[4 * i], &host[i], 4);
      } else {
        const bf16 h = float_to_bf16_rn(host[i]);
        std::memcpy(&bytes[2 * i], &h, 2);
      }
    }
    cuda::copy_to_device(get(), bytes.data(), bytes.size());
  }
  std::vector<float> values() const {
    cuda::synchronize();
    std::vector<uint8_t> bytes(n_ * dtype_size(dt_));
    cuda::copy_to_host(bytes.data(), get(), bytes.size());
    std::vector<float> out(n_);
    for (size_t i = 0; i < n_; ++i) {
      if (dt_ == DType::kF32) {
        std::memcpy(&out[i], &bytes[4 * i], 4);
      } else {
        bf16 h;
        std::memcpy(&h, &bytes[2 * i], 2);
        out[i] = bf16_to_float(h);
      }
    }
    return out;
  }

 private:
  DType dt_;
  size_t n_, offset_;
  void* base_;
};

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// Emulation: equal bits. GPU: within `rel` of the magnitude plus one rounding
// of the output type.
void expect_matches(const std::vector<float>& got, const std::vector<float>& want,
                    const std::vector<float>& mag, DType out_dt, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double ulp = out_dt == DType::kF32 ? 0.0 : std::ldexp(std::fabs(double(want[i])), -7);
    const bool ok = cuda::emulated()
                        ? same_bits(got[i], want[i])
                        : std::fabs(double(got[i]) - double(want[i])) <= 1e-5 * mag[i] + ulp;
    if (!ok && ++bad <= 5) {
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

class GemmGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::device_available(&reason)) GTEST_SKIP() << reason;
    stream_ = cuda::stream_create();
    gemm_ = std::make_unique<cuda::Gemm>(stream_);
  }
  void TearDown() override {
    gemm_.reset();
    if (stream_) cuda::stream_destroy(stream_);
  }
  cuda::Stream stream_ = nullptr;
  std::unique_ptr<cuda::Gemm> gemm_;
};

struct BatchedCase {
  bool ta, tb;
  DType ab, d;
  float alpha, beta;
};

TEST_F(GemmGpu, BatchedRowMajorProductOfEveryTranspose) {
  const int M = 7, N = 5, K = 9, batch = 3;
  for (const BatchedCase c : {BatchedCase{false, false, DType::kBF16, DType::kBF16, 1.0f, 0.0f},
                              BatchedCase{false, true, DType::kBF16, DType::kF32, 0.25f, 0.0f},
                              BatchedCase{true, false, DType::kBF16, DType::kF32, 1.0f, 0.0f},
                              BatchedCase{true, true, DType::kF32, DType::kF32, -0.5f, 1.0f},
                              BatchedCase{false, false, DType::kF32, DType::kF32, 1.0f, 0.5f},
                              BatchedCase{true, false, DType::kBF16, DType::kBF16, 1.0f, 1.0f}}) {
    SCOPED_TRACE(std::string(c.ta ? "A^T" : "A") + (c.tb ? " B^T " : " B ") + dtype_name(c.ab) +
                 " -> " + dtype_name(c.d) + " beta " + std::to_string(c.beta));
    cuda::Gemm::Batched s;
    s.trans_a = c.ta;
    s.trans_b = c.tb;
    s.M = M;
    s.N = N;
    s.K = K;
    s.batch = batch;
    const int a_rows = c.ta ? K : M, a_cols = c.ta ? M : K;
    const int b_rows = c.tb ? N : K, b_cols = c.tb ? K : N;
    s.lda = a_cols + 3;  // row strides above the row length
    s.ldb = b_cols + 1;
    s.ldd = N + 2;
    s.stride_a = s.lda * a_rows + 5;  // and gaps between the batch items
    s.stride_b = s.ldb * b_rows + 8;
    s.stride_d = s.ldd * M + 4;
    s.alpha = c.alpha;
    s.beta = c.beta;
    const auto a = values(size_t(s.stride_a) * batch, 1), b = values(size_t(s.stride_b) * batch, 2);
    const auto d0 = values(size_t(s.stride_d) * batch, 3);
    Buf da(c.ab, a), db(c.ab, b), dd(c.d, d0);
    gemm_->batched(s, c.ab, da.get(), db.get(), c.d, dd.get());
    const auto got = dd.values();
    // Reference over the stored (rounded) values.
    auto want = d0, mag = std::vector<float>(d0.size(), 0.0f);
    for (size_t i = 0; i < want.size(); ++i) want[i] = round_to(c.d, d0[i]);
    for (int bt = 0; bt < batch; ++bt) {
      for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
          float acc = 0.0f, m = 0.0f;
          for (int k = 0; k < K; ++k) {
            const float x =
                round_to(c.ab, a[size_t(bt * s.stride_a + (c.ta ? k * s.lda + i : i * s.lda + k))]);
            const float y =
                round_to(c.ab, b[size_t(bt * s.stride_b + (c.tb ? j * s.ldb + k : k * s.ldb + j))]);
            acc += x * y;
            m += std::fabs(x * y);
          }
          const size_t at = size_t(bt * s.stride_d + i * s.ldd + j);
          float t = c.alpha * acc;
          if (c.beta != 0.0f) t = t + c.beta * want[at];
          want[at] = round_to(c.d, t);
          mag[at] = std::fabs(c.alpha) * m + std::fabs(c.beta * d0[at]);
        }
      }
    }
    // Padding and gaps of D are left as they were.
    expect_matches(got, want, mag, c.d, "D");
  }
}

TEST_F(GemmGpu, UnalignedPointersAndBiasGiveTheAlignedResult) {
  const int N = 11, C = 24, OC = 19;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const auto x = values(size_t(N) * C, 4), w = values(size_t(OC) * C, 5), bias = values(OC, 6);
    Buf xa(dt, x), wa(dt, w), ba(dt, bias), oa(dt, std::vector<float>(size_t(N) * OC, 0.0f));
    // One element past a 256-byte boundary: 2 or 4 bytes aligned.
    Buf xu(dt, x, 1), wu(dt, w, 1), bu(dt, bias, 1), ou(dt, std::vector<float>(size_t(N) * OC), 1);
    gemm_->matmul_forward(dt, oa.get(), xa.get(), wa.get(), ba.get(), N, C, OC);
    gemm_->matmul_forward(dt, ou.get(), xu.get(), wu.get(), bu.get(), N, C, OC);
    const auto aligned = oa.values(), unaligned = ou.values();
    std::vector<float> mag(aligned.size());
    for (int n = 0; n < N; ++n) {
      for (int o = 0; o < OC; ++o) {
        float m = std::fabs(round_to(dt, bias[size_t(o)]));
        for (int k = 0; k < C; ++k) {
          m += std::fabs(round_to(dt, x[size_t(n) * C + k]) * round_to(dt, w[size_t(o) * C + k]));
        }
        mag[size_t(n) * OC + o] = m;
      }
    }
    expect_matches(unaligned, aligned, mag, dt, "out");
    // The reference: sum in k order, bias added to the fp32 sum, one rounding.
    std::vector<float> want(aligned.size());
    for (int n = 0; n < N; ++n) {
      for (int o = 0; o < OC; ++o) {
        float acc = 0.0f;
        for (int k = 0; k < C; ++k) {
          acc += round_to(dt, x[size_t(n) * C + k]) * round_to(dt, w[size_t(o) * C + k]);
        }
        want[size_t(n) * OC + o] = round_to(dt, acc + round_to(dt, bias[size_t(o)]));
      }
    }
    expect_matches(aligned, want, mag, dt, "out vs reference");
  }
}

TEST_F(GemmGpu, BackwardIsDeterministicAndSumsTheBiasOverRowChunks) {
  // N = 300 rows: several row chunks of the bias gradient.
  const int N = 300, C = 12, OC = 40;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const auto x = values(size_t(N) * C, 7), w = values(size_t(OC) * C, 8),
               g = values(size_t(N) * OC, 9), old_db = values(OC, 10);
    Buf dx(dt, x), dw(dt, w), dg(dt, g);
    void* scratch = cuda::device_malloc(gemm_->matmul_backward_scratch_bytes(N, OC));
    std::vector<std::vector<float>> runs[2];
    for (int run = 0; run < 2; ++run) {
      for (GradWrite mode : {GradWrite::kOverwrite, GradWrite::kAccumulate}) {
        Buf dinp(dt, values(size_t(N) * C, 11)), dweight(dt, values(size_t(OC) * C, 12)),
            dbias(dt, old_db);
        gemm_->matmul_backward(dt, dt, dinp.get(), mode, dweight.get(), dbias.get(), mode, dg.get(),
                               dx.get(), dw.get(), N, C, OC, scratch);
        runs[run].push_back(dinp.values());
        runs[run].push_back(dweight.values());
        runs[run].push_back(dbias.values());
      }
    }
    cuda::device_free(scratch);
    ASSERT_EQ(runs[0].size(), runs[1].size());
    for (size_t k = 0; k < runs[0].size(); ++k) {
      EXPECT_EQ(0, std::memcmp(runs[0][k].data(), runs[1][k].data(), runs[0][k].size() * 4))
          << "output " << k << " differs between two identical runs";
    }
    // dbias = (old +) column sums, in fp64 here: fp32 sums of <= 300 terms.
    for (int acc = 0; acc < 2; ++acc) {
      const auto& got = runs[0][size_t(acc) * 3 + 2];
      for (int o = 0; o < OC; ++o) {
        double want = acc ? double(round_to(dt, old_db[size_t(o)])) : 0.0, mag = std::fabs(want);
        for (int n = 0; n < N; ++n) {
          const double v = round_to(dt, g[size_t(n) * OC + o]);
          want += v;
          mag += std::fabs(v);
        }
        const double tol = 1e-6 * mag + (dt == DType::kF32 ? 0.0 : std::ldexp(std::fabs(want), -8));
        EXPECT_NEAR(got[size_t(o)], want, tol) << "dbias " << o << (acc ? " (accumulate)" : "");
      }
    }
  }
}

// column_sums (the bias gradient) in the order column_sums.h promises: fp32
// adds of each column's rows in row order within a chunk of
// column_sums_partition, then chunk_sums.cuh's 8 segments of consecutive
// chunks, then the segments, one rounding of base + total. Plain fp32 adds
// are exact IEEE operations on both devices, so a GPU and the emulation must
// both give these bits.
std::vector<float> column_sums_in_order(const std::vector<float>& src, int rows, int cols,
                                        const std::vector<float>& base, DType dst_dt) {
  const cuda::ColumnSumsPartition part = cuda::column_sums_partition(rows, cols);
  const int per = (part.chunks + cuda::kChunkSumSegments - 1) / cuda::kChunkSumSegments;
  std::vector<float> out(static_cast<size_t>(cols));
  for (int c = 0; c < cols; ++c) {
    std::vector<float> chunk_sums(size_t(part.chunks), 0.0f);
    for (int r = 0; r < rows; ++r)
      chunk_sums[size_t(r / part.rows_per_chunk)] += src[size_t(r) * cols + c];
    float total = 0.0f;
    for (int q = 0; q < cuda::kChunkSumSegments; ++q) {
      float segment = 0.0f;
      for (int k = q * per; k < std::min(part.chunks, (q + 1) * per); ++k)
        segment += chunk_sums[size_t(k)];
      total = q == 0 ? segment : total + segment;
    }
    out[size_t(c)] = round_to(dst_dt, base[size_t(c)] + total);
  }
  return out;
}

TEST_F(GemmGpu, ColumnSumsAddInTheirStatedOrderAtEveryWidthAndAlignment) {
  struct Shape {
    int rows, cols;
  };
  // Widths off the 8-column groups (19, 1), 512-column blocks with a partial
  // last one (776, 3072 = 6 full), one row, a chunk count that splits
  // unevenly into segments (5000 rows of 32: 157 chunks, segments of 20) and
  // one below the segment count (70 rows at 3072 columns: 7 chunks of 10 rows
  // rounded to 32: 3 chunks).
  for (const Shape sh : {Shape{5000, 19}, Shape{70, 3072}, Shape{2000, 776}, Shape{1, 8},
                         Shape{33, 1}, Shape{600, 2304}}) {
    for (DType src_dt : {DType::kF32, DType::kBF16}) {
      for (DType dst_dt : {src_dt, DType::kF32}) {
        for (GradWrite mode : {GradWrite::kOverwrite, GradWrite::kAccumulate}) {
          SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.cols) + " " +
                       dtype_name(src_dt) + " -> " + dtype_name(dst_dt) +
                       (mode == GradWrite::kAccumulate ? " accumulate" : " overwrite"));
          std::vector<float> src = values(size_t(sh.rows) * sh.cols, 13);
          for (float& v : src) v = round_to(src_dt, v * 0.37f);  // inexact sums
          std::vector<float> old = values(size_t(sh.cols), 14);
          for (float& v : old) v = round_to(dst_dt, v);
          const std::vector<float> base =
              mode == GradWrite::kAccumulate ? old : std::vector<float>(old.size(), 0.0f);
          const auto want = column_sums_in_order(src, sh.rows, sh.cols, base, dst_dt);
          void* scratch = cuda::device_malloc(cuda::column_sums_scratch_bytes(sh.rows, sh.cols));
          for (size_t offset : {size_t(0), size_t(1)}) {  // 1: the element-by-element loads
            Buf in(src_dt, src, offset), out(dst_dt, old, offset);
            cuda::column_sums(dst_dt, src_dt, out.get(), in.get(), sh.rows, sh.cols, mode, scratch,
                              stream_);
            const auto got = out.values();
            size_t bad = 0;
            for (size_t c = 0; c < got.size(); ++c) {
              if (!same_bits(got[c], want[c]) && ++bad <= 5) {
                ADD_FAILURE() << "offset " << offset << " column " << c << ": got " << got[c]
                              << ", want " << want[c];
              }
            }
            EXPECT_EQ(bad, 0u) << "offset " << offset;
          }
          cuda::device_free(scratch);
        }
      }
    }
  }
  EXPECT_THROW(cuda::column_sums(DType::kF32, DType::kF32, nullptr, nullptr, 0, 4,
                                 GradWrite::kOverwrite, nullptr, stream_),
               std::invalid_argument);
}

TEST_F(GemmGpu, RejectsBadShapes) {
  EXPECT_THROW(gemm_->matmul_forward(DType::kF32, nullptr, nullptr, nullptr, nullptr, 0, 1, 1),
               std::invalid_argument);
  EXPECT_THROW(gemm_->matmul_backward_scratch_bytes(1, -1), std::invalid_argument);
  cuda::Gemm::Batched s;
  s.M = 2;
  s.N = 2;
  s.K = 2;
  s.lda = 1;  // below the row length
  s.ldb = 2;
  s.ldd = 2;
  EXPECT_THROW(gemm_->batched(s, DType::kF32, nullptr, nullptr, DType::kF32, nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace srkit
