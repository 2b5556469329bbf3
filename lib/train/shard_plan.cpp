#include "lib/train/shard_plan.h"

#include <stdexcept>
#include <string>

#include "lib/model/param_layout.h"

namespace srkit {

ShardPlan::ShardPlan(size_t total, int world) : total_(total), world_(world) {
  if (world < 1) {
    throw std::invalid_argument("ShardPlan: world size must be >= 1 (got " + std::to_string(world) +
                                ")");
  }
  bulk_ = total / (size_t(world) * kParamAlign) * kParamAlign;
  if (bulk_ == 0) {
    throw std::invalid_argument("a model of " + std::to_string(total) +
                                " flat elements is too small to shard over " +
                                std::to_string(world) + " ranks (needs at least " +
                                std::to_string(size_t(world) * kParamAlign) + ")");
  }
}

}  // namespace srkit
