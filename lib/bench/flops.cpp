#include "lib/bench/flops.h"

#include "lib/model/param_layout.h"

namespace srkit {

StepFlops train_step_flops_split(const GPTConfig& config, int B, int T) {
  const double tokens = double(B) * double(T);
  const double n = double(ParamLayout(config).num_params());
  StepFlops f;
  f.dense = 6.0 * n * tokens;
  f.attention = 12.0 * double(config.num_layers) * tokens * double(T) * double(config.channels);
  return f;
}

double train_step_flops(const GPTConfig& config, int B, int T) {
  return train_step_flops_split(config, B, T).total();
}

}  // namespace srkit
