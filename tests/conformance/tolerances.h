// How closely a device backend must agree with the CPU backend, op by op
// (docs/architecture.md, "One math, two devices"). Bit-exact where both devices run the
// same element rule from kernels/common in the same order: convert, encoder
// forward and backward (the backward's per-token sums run in position order on
// both), residual, GELU forward and backward, gather, grad_clip, and every
// AdamW weight and state bit. Elsewhere a device may reduce in another order
// (tree sums, GEMM blocking, a flash-style attention), and the bound below is
// what that costs.
#pragma once

namespace srkit::conformance {

// mean_loss and sum_squares: fp64 sums of fp32 values; a device may add them in
// another order (about n * 2^-53 relative for the sizes here).
constexpr double kReductionRel = 1e-12;

// LayerNorm: mean, variance and the backward's two row sums and column sums are
// fp32 reductions whose order a device picks; each is off by a few fp32 ulps of
// its magnitude, which reach the outputs relative to the row's scale.
//   fp32: |dev - cpu| <= kLayernormF32Abs + kLayernormF32Rel * |cpu| (values O(1))
//   bf16: 2 bf16 ulps (a few fp32 ulps before the final rounding can move a
//         value across one rounding boundary; 2 leaves room for the backward's
//         dinp, where mean(dnorm) cancels) plus the fp32 form's
//         kLayernormF32Abs: a dinp that cancels to near zero keeps the fp32
//         computation's absolute error, which no rounding removes
//   mean, rstd (fp32 in both dtypes): kLayernormStatsRel relative (mean: plus
//         kLayernormStatsRel absolute, it may be 0).
//   dweight, dbias (column sums over all N rows, long when N is): as above,
//         plus kLayernormParamRel of the column's magnitude sum over rows,
//         sum |norm * dout| and sum |dout| (a few fp32 ulps of it, as for the
//         matmul).
constexpr double kLayernormF32Abs = 1e-5;
constexpr double kLayernormF32Rel = 1e-5;
constexpr double kLayernormBf16Ulps = 2.0;
constexpr double kLayernormStatsRel = 1e-6;
constexpr double kLayernormParamRel = 1e-6;

// Matmul: fp32 accumulation in another blocking order (cuBLASLt, split-k) is
// off by a few fp32 ulps of the magnitude sum sum |a_k b_k| (+ |bias|, + |old|
// when accumulating); bf16 outputs are that sum rounded once, so 1 bf16 ulp
// more.
constexpr double kMatmulF32Rel = 1e-5;
constexpr double kMatmulBf16Ulps = 1.0;

// Attention: a device may recompute the probabilities in backward from the
// saved log-sum-exp (attention_sizes: "cuda" keeps only that) and sum in tiles.
//   fp32: kAttentionF32Rel of the tensor's largest magnitude.
//   bf16: the CPU stores the probabilities rounded to bf16 and multiplies with
//         those, a device may use fp32 probabilities: each term then differs by
//         up to 2^-8 relative, so kAttentionBf16Rel (2^-6) of the tensor's
//         largest magnitude (forward: out; backward: dinp), plus one bf16 ulp.
constexpr double kAttentionF32Rel = 1e-5;
constexpr double kAttentionBf16Rel = 1.0 / 64;

// Cross-entropy: log-sum-exp over V in another order and possibly another exp:
//   losses (fp32, O(log V)): kCrossEntropyLossAbs absolute.
//   dlogits: (p - onehot) * dloss with p in [0, 1]: fp32 kCrossEntropyGradRel *
//            |dloss| absolute; bf16 one ulp of the CPU's value.
constexpr double kCrossEntropyLossAbs = 1e-5;
constexpr double kCrossEntropyGradRel = 1e-6;
constexpr double kCrossEntropyBf16Ulps = 1.0;

// AdamW telemetry: counts exact; the sums of squares are fp32 within tiles and
// fp64 beyond on the CPU (kernels/cpu/adamw.h), so another tiling is ~1e-6
// relative.
constexpr double kTelemetrySumRel = 1e-5;

// ---- the whole model (tests/conformance/backend_model_suite.h) ----
// Loss of a micro-batch: fp32 storage compounds the per-op bounds above through
// ~20 ops; bf16 storage rounds every activation, so a one-ulp difference in one
// op's output (2^-8 relative) moves the loss by a fraction of that.
constexpr double kModelLossRelF32 = 1e-5;
constexpr double kModelLossRelBf16 = 4e-3;
// Gradients after two micro-batches, per element, relative to the largest
// gradient magnitude of the model: fp32 1e-4 (the per-op bounds, compounded);
// bf16 2^-4 (every activation and gradient is rounded to 8 significant bits,
// and a one-ulp difference early in the backward pass is carried down the
// layers).
constexpr double kModelGradRelF32 = 1e-4;
constexpr double kModelGradRelBf16 = 1.0 / 16;
// Weights after three AdamW steps with lr kModelLr. Where the gradients agree
// closely, the updates do too; where a gradient is near zero its normalised
// update m / sqrt(v) may even change sign, and AdamW bounds each update by about
// lr. So: every weight within kModelWeightsLooseLr * lr (+ 2 bf16 ulps where
// the weights are bf16: with SR the same random bits may round a slightly
// different value to the other neighbour), and at least kModelWeightsTightShare
// of them within kModelWeightsTightLr * lr (+ 1 bf16 ulp).
constexpr float kModelLr = 1e-3f;
constexpr double kModelWeightsLooseLr = 6.0;  // 3 steps, each at most ~lr either way
constexpr double kModelWeightsTightLr = 0.05;
constexpr double kModelWeightsTightShare = 0.98;

}  // namespace srkit::conformance
