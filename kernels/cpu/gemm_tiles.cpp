#include "kernels/cpu/gemm_tiles.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/gemm_bf16_dot.h"
#include "kernels/cpu/gemm_bf16_path.h"

namespace srkit::cpu {
namespace {

// Tile sides. Single-threaded OpenBLAS (Haswell kernels, Zen 5) on a 256 x 256
// tile runs at 0.98-1.02 of a 1024 x 1024 call for K = 256..3072; 128 x 128 at
// 0.94-0.98, 64 x 64 at ~0.9. Tiles start at 512 rows x 256 columns: a thread
// keeps the A panel (the tile's rows) over consecutive tiles and re-widens only
// the B panel, 1 / (2 x rows) widened elements per flop, and the fp32 tile
// (512 KB) stays in a 1 MB L2 for the rounding pass. They shrink where the
// product is small (fewer than 8 tiles to share among threads) or the
// reduction so long that the widened panels would be large: (rows + cols) x K
// beyond 3 x 2^20 floats (12 MiB a thread, a 512 x 256 tile at K = 4096). The
// LM head's dinp (K = Vp = 50304) ends at 128 x 128 tiles, 51.6 MB a thread,
// which run at 0.88 of a large call there (64 x 64: 0.76). fp32 operands are
// not widened (OpenBLAS packs them itself), so their tiles do not shrink for K.
constexpr int kTileRows = 512;
constexpr int kTileCols = 256;
constexpr int kMinTiles = 8;                      // a product with fewer tiles gets smaller ones...
constexpr int kMinSide = 64;                      // ...down to this side
constexpr size_t kPanelFloats = size_t(3) << 20;  // (rows + cols) x K beyond which tiles shrink...
constexpr int kMinPanelSide = 128;                // ...down to this side
constexpr int kSideMultiple = 16;  // the widest BLAS micro-kernel edge: whole blocks inside a tile
constexpr int kMaxProducts = 4;

constexpr size_t kAlignFloats = Workspace::kAlignment / sizeof(float);
size_t aligned(size_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }
int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Halves the longer side of t (columns on a tie; the other side when the longer
// one is at `floor`), keeping a multiple of kSideMultiple and at least floor.
// False when neither side is above floor.
bool shrink(GemmTiles& t, int floor) {
  int* side = t.cols >= t.rows ? &t.cols : &t.rows;
  if (*side <= floor) side = side == &t.cols ? &t.rows : &t.cols;
  if (*side <= floor) return false;
  const int half = (*side / 2 + kSideMultiple - 1) / kSideMultiple * kSideMultiple;
  *side = std::max(floor, half);
  return true;
}

// OpenBLAS on one thread while alive: the tiles are the parallelism. A
// pthreads OpenBLAS may be called from several threads at once (its buffer
// pool is taken under a lock; test_ops_threads checks concurrent calls against
// serial ones). The previous setting comes back for raw sgemm callers.
class OneBlasThread {
 public:
  OneBlasThread() : saved_(openblas_get_num_threads()) {
    if (saved_ != 1) openblas_set_num_threads(1);
  }
  ~OneBlasThread() {
    if (saved_ != 1) openblas_set_num_threads(saved_);
  }
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  int saved_;
};

// Rows [m0, m0 + mm) and columns [n0, n0 + nn) of a product's output.
struct Tile {
  int m0, mm, n0, nn;
};

template <typename T>
const T* a_rows(const GemmProduct<T>& p, int m0) {
  return p.trans_a ? p.a + m0 : p.a + size_t(m0) * size_t(p.lda);
}
template <typename T>
const T* b_cols(const GemmProduct<T>& p, int n0) {
  return p.trans_b ? p.b + size_t(n0) * size_t(p.ldb) : p.b + n0;
}

// dst[r * cols + c] = src[r * ld + c]: a strided bf16 block as a packed fp32 one.
// The source (an activation or weight panel, usually outside the core's caches)
// is prefetched kPrefetchAhead elements ahead in the block's own order, across
// row ends: with the hardware prefetcher alone the loads' misses took most of
// the widening time, and a thread's panels are re-read for every tile.
void widen_block(const bf16* src, size_t ld, int rows, int cols, float* dst) {
  constexpr int kChunk = 64;               // elements per step (two cache lines of bf16)
  constexpr size_t kPrefetchAhead = 1024;  // 2 KB of bf16
  int ahead_row = int(kPrefetchAhead / size_t(cols)),
      ahead_col = int(kPrefetchAhead % size_t(cols));
  for (int r = 0; r < rows; ++r) {
    const bf16* s = src + size_t(r) * ld;
    float* d = dst + size_t(r) * size_t(cols);
    for (int c0 = 0; c0 < cols; c0 += kChunk) {
      if (ahead_row < rows) {
        const char* p = reinterpret_cast<const char*>(src + size_t(ahead_row) * ld + ahead_col);
        __builtin_prefetch(p);
        __builtin_prefetch(p + 64);
      }
      ahead_col += kChunk;
      while (ahead_col >= cols) {
        ahead_col -= cols;
        ++ahead_row;
      }
      const int c1 = std::min(cols, c0 + kChunk);
#pragma omp simd
      for (int c = c0; c < c1; ++c) d[c] = bf16_to_float(s[c]);
    }
  }
}

// A thread's scratch: the widened panels of its current tile and the fp32
// tile itself. The A panel stays valid while consecutive tiles share it.
struct ThreadScratch {
  float *a = nullptr, *b = nullptr, *acc = nullptr;
  int layout = -1;                           // the product the pointers are laid out for
  int product = -1, m0 = -1;                 // whose A panel `a` holds
  Bf16GemmPath path = Bf16GemmPath::kSgemm;  // how bf16 tiles multiply (one per call)
};

// The panels of product `index` (tiles g, reduction K) from `base` on, each
// 64-byte aligned; thread_scratch_floats is their total.
void lay_out(ThreadScratch& s, float* base, const GemmTiles& g, int K, int index) {
  s.a = base;
  s.b = s.a + aligned(size_t(g.rows) * size_t(K));
  s.acc = s.b + aligned(size_t(g.cols) * size_t(K));
  s.layout = index;
  s.product = -1;
}

// fp32: the BLAS works on the arrays themselves (beta = 1 accumulates), then
// the bias goes onto the finished sums while the tile is in cache.
void run_tile(const GemmProduct<float>& p, int, const Tile& t, ThreadScratch&) {
  float* c = p.c + size_t(t.m0) * size_t(p.ldc) + t.n0;
  cblas_sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans,
              p.trans_b ? CblasTrans : CblasNoTrans, t.mm, t.nn, p.K, 1.0f, a_rows(p, t.m0), p.lda,
              b_cols(p, t.n0), p.ldb, p.accumulate ? 1.0f : 0.0f, c, p.ldc);
  if (p.bias == nullptr || p.accumulate) return;
  const float* bias = p.bias + t.n0;
  for (int r = 0; r < t.mm; ++r) {
    float* o = c + size_t(r) * size_t(p.ldc);
#pragma omp simd
    for (int j = 0; j < t.nn; ++j) o[j] = o[j] + bias[j];
  }
}

// A bf16 product's finished fp32 tile `acc` into its fp32 output, in the
// order of the bf16 stores below without their rounding: old + sum, or sum + bias.
void store_tile_f32(const GemmProduct<bf16>& p, const Tile& t, const float* acc) {
  for (int r = 0; r < t.mm; ++r) {
    const float* a = acc + size_t(r) * size_t(t.nn);
    float* o = p.c_f32 + size_t(t.m0 + r) * size_t(p.ldc) + t.n0;
    if (p.accumulate) {
#pragma omp simd
      for (int j = 0; j < t.nn; ++j) o[j] = o[j] + a[j];
    } else if (p.bias) {
      const bf16* bias = p.bias + t.n0;
#pragma omp simd
      for (int j = 0; j < t.nn; ++j) o[j] = a[j] + bf16_to_float(bias[j]);
    } else {
#pragma omp simd
      for (int j = 0; j < t.nn; ++j) o[j] = a[j];
    }
  }
}

// bf16: the panels widened for sgemm, or packed in pairs for VDPBF16PS (the
// packed words take at most the widened floats' room), multiplied into the
// fp32 tile; then one rounding per element: RN(old + sum) or RN(sum + bias).
void run_tile(const GemmProduct<bf16>& p, int index, const Tile& t, ThreadScratch& s) {
  const int K = p.K;
  const bool dot = s.path == Bf16GemmPath::kAvx512Bf16;
  uint32_t* packed_a = reinterpret_cast<uint32_t*>(s.a);
  uint32_t* packed_b = reinterpret_cast<uint32_t*>(s.b);
  if (s.product != index || s.m0 != t.m0) {
    if (dot) {
      bf16_dot::pack_a(a_rows(p, t.m0), size_t(p.lda), p.trans_a, t.mm, K, packed_a);
    } else if (p.trans_a) {
      widen_block(a_rows(p, t.m0), size_t(p.lda), K, t.mm, s.a);
    } else {
      widen_block(a_rows(p, t.m0), size_t(p.lda), t.mm, K, s.a);
    }
    s.product = index;
    s.m0 = t.m0;
  }
  if (dot) {
    bf16_dot::pack_b(b_cols(p, t.n0), size_t(p.ldb), p.trans_b, t.nn, K, packed_b);
    bf16_dot::tile_product(packed_a, packed_b, t.mm, t.nn, K, s.acc, size_t(t.nn));
  } else {
    if (p.trans_b) {
      widen_block(b_cols(p, t.n0), size_t(p.ldb), t.nn, K, s.b);
    } else {
      widen_block(b_cols(p, t.n0), size_t(p.ldb), K, t.nn, s.b);
    }
    cblas_sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans,
                p.trans_b ? CblasTrans : CblasNoTrans, t.mm, t.nn, K, 1.0f, s.a,
                p.trans_a ? t.mm : K, s.b, p.trans_b ? K : t.nn, 0.0f, s.acc, t.nn);
  }
  if (p.c_f32) return store_tile_f32(p, t, s.acc);
  for (int r = 0; r < t.mm; ++r) {
    const float* a = s.acc + size_t(r) * size_t(t.nn);
    bf16* o = p.c + size_t(t.m0 + r) * size_t(p.ldc) + t.n0;
    if (p.accumulate) {
#pragma omp simd
      for (int j = 0; j < t.nn; ++j) o[j] = float_to_bf16_rn(bf16_to_float(o[j]) + a[j]);
    } else if (p.bias) {
      const bf16* bias = p.bias + t.n0;
#pragma omp simd
      for (int j = 0; j < t.nn; ++j) o[j] = float_to_bf16_rn(a[j] + bf16_to_float(bias[j]));
    } else {
#pragma omp simd
      for (int j = 0; j < t.nn; ++j) o[j] = float_to_bf16_rn(a[j]);
    }
  }
}

size_t thread_scratch_floats(int M, int N, int K) {
  const GemmTiles t = gemm_tiles(M, N, K, /*widened_panels=*/true);
  return aligned(size_t(t.rows) * size_t(K)) + aligned(size_t(t.cols) * size_t(K)) +
         aligned(size_t(t.rows) * size_t(t.cols));
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B,
           int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

GemmTiles gemm_tiles(int M, int N, int K, bool widened_panels) {
  GemmTiles t{std::min(M, kTileRows), std::min(N, kTileCols)};
  while (widened_panels && size_t(t.rows + t.cols) * size_t(K) > kPanelFloats &&
         shrink(t, kMinPanelSide)) {
  }
  while (ceil_div(M, t.rows) * ceil_div(N, t.cols) < kMinTiles && shrink(t, kMinSide)) {
  }
  return t;
}

template <typename T>
size_t gemm_scratch_floats(const GemmProduct<T>* products, int count, int threads) {
  if constexpr (std::is_same_v<T, float>) {
    return 0;
  } else {
    size_t per_thread = 0;
    for (int i = 0; i < count; ++i) {
      const GemmProduct<T>& p = products[i];
      per_thread = std::max(per_thread, thread_scratch_floats(p.M, p.N, p.K));
    }
    return per_thread * size_t(std::max(threads, 1));
  }
}

template <typename T>
void gemm_tiled(const GemmProduct<T>* products, int count, Workspace& ws) {
  // Inside a region the tiles would run on a team of one, every caller's
  // thread on the same scratch panels.
  if (omp_in_parallel()) {
    throw std::logic_error("gemm_tiled: called inside an OpenMP parallel region");
  }
  if (count < 1 || count > kMaxProducts) {
    throw std::invalid_argument("gemm_tiled: " + std::to_string(count) + " products (expected 1.." +
                                std::to_string(kMaxProducts) + ")");
  }
  // Tiles of all products in one index space, each product's row by row, the
  // products with the most work per tile first: threads take tiles as they
  // free up, so the last ones to finish are the small ones. (Which thread runs
  // a tile changes no bit of it; only the tile's geometry does.)
  int order[kMaxProducts];
  GemmTiles tiles[kMaxProducts];
  double work = 0.0;
  for (int i = 0; i < count; ++i) {
    const GemmProduct<T>& p = products[i];
    if (p.bias && p.accumulate) {
      throw std::invalid_argument(
          "gemm_tiled: a bias with accumulate (the bias goes with overwrite)");
    }
    if ((p.c_f32 != nullptr) == (p.c != nullptr) || (p.c_f32 && !std::is_same_v<T, bf16>)) {
      throw std::invalid_argument("gemm_tiled: a product writes c, or (bf16 only) c_f32");
    }
    tiles[i] = gemm_tiles(p.M, p.N, p.K, /*widened_panels=*/std::is_same_v<T, bf16>);
    work += double(p.M) * double(p.N) * double(p.K);
    order[i] = i;
  }
  auto tile_work = [&](int i) { return double(tiles[i].rows) * tiles[i].cols * products[i].K; };
  std::stable_sort(order, order + count, [&](int x, int y) { return tile_work(x) > tile_work(y); });
  int tile_cols[kMaxProducts], first[kMaxProducts + 1] = {0};
  for (int k = 0; k < count; ++k) {
    const GemmProduct<T>& p = products[order[k]];
    tile_cols[k] = ceil_div(p.N, tiles[order[k]].cols);
    first[k + 1] = first[k] + ceil_div(p.M, tiles[order[k]].rows) * tile_cols[k];
  }
  const int total = first[count];
  const int threads = omp_get_max_threads();
  const size_t scratch_floats = gemm_scratch_floats(products, count, threads);
  const size_t stride = scratch_floats / size_t(threads);
  float* scratch = scratch_floats ? ws.floats(0, scratch_floats) : nullptr;
  const OneBlasThread one_blas_thread;
  const Bf16GemmPath path =
      std::is_same_v<T, bf16> ? bf16_gemm_path() : Bf16GemmPath::kSgemm;  // once, outside the team
#pragma omp parallel if (parallel : total > 1 && work >= double(kParallelMinWork))
  {
    float* mine = scratch ? scratch + stride * size_t(omp_get_thread_num()) : nullptr;
    ThreadScratch s;
    s.path = path;
#pragma omp for schedule(dynamic, 1)
    for (int t = 0; t < total; ++t) {
      int k = 0;
      while (t >= first[k + 1]) ++k;
      const int i = order[k];
      const GemmProduct<T>& p = products[i];
      const GemmTiles& g = tiles[i];
      if (mine && s.layout != i) lay_out(s, mine, g, p.K, i);
      const int local = t - first[k], m0 = local / tile_cols[k] * g.rows,
                n0 = local % tile_cols[k] * g.cols;
      run_tile(p, i, Tile{m0, std::min(g.rows, p.M - m0), n0, std::min(g.cols, p.N - n0)}, s);
    }
  }
}

#define SRKIT_INSTANTIATE(T)                                               \
  template size_t gemm_scratch_floats<T>(const GemmProduct<T>*, int, int); \
  template void gemm_tiled<T>(const GemmProduct<T>*, int, Workspace&);
SRKIT_INSTANTIATE(float)
SRKIT_INSTANTIATE(bf16)
#undef SRKIT_INSTANTIATE

}  // namespace srkit::cpu
