// How W ranks split the flat parameter buffer for ZeRO-1 and for the partial
// sums of the gradient norm.
//
// Rank r owns [begin(r), end(r)): ranks 0..W-2 own `bulk` elements each, a
// multiple of kParamAlign (so the 8-element Philox groups of the SR contract
// are never split), and the last rank owns its bulk block plus the `tail` that
// is left over (fewer than W * kParamAlign elements). The buffer therefore needs
// no padding: the communicator's reduce_scatter and all_gather, which want equal
// blocks, run over the W bulk blocks, and the short tail goes by one extra
// collective (all_reduce of its gradients, broadcast of its weights from the
// last rank).
#pragma once

#include <cstddef>

namespace srkit {

class ShardPlan {
 public:
  // Throws std::invalid_argument when world < 1, or when total is too small to
  // give every rank an aligned, non-empty shard (total < world * kParamAlign).
  ShardPlan(size_t total, int world);

  int world() const { return world_; }
  size_t total() const { return total_; }
  size_t bulk() const { return bulk_; }  // elements of each bulk block
  size_t bulk_total() const { return bulk_ * size_t(world_); }
  size_t tail() const { return total_ - bulk_total(); }
  size_t begin(int rank) const { return bulk_ * size_t(rank); }
  size_t end(int rank) const { return rank + 1 == world_ ? total_ : begin(rank) + bulk_; }

 private:
  size_t total_;
  int world_;
  size_t bulk_;
};

}  // namespace srkit
