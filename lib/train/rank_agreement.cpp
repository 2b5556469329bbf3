#include "lib/train/rank_agreement.h"

#include <nlohmann/json.hpp>

#include "lib/precision.h"
#include "lib/train/replica_check.h"

namespace srkit {

void check_ranks_agree_on_config(Communicator& comm, const TrainConfig& c) {
  if (comm.world_size() == 1) return;
  const nlohmann::json j = c.to_json(comm.world_size());
  auto part = [&](std::initializer_list<const char*> keys) {
    nlohmann::json out = nlohmann::json::object();
    for (const char* k : keys) out[k] = j.at(k);
    return out.dump();
  };
  comm.check_same_on_all_ranks("model",
                               part({"layers", "channels", "heads", "vocab", "max_seq_len"}));
  comm.check_same_on_all_ranks("strategy", c.strategy.name + " (" + c.strategy.describe() + ")");
  comm.check_same_on_all_ranks("batch config", part({"batch", "seq_len", "grad_accum", "steps"}));
  comm.check_same_on_all_ranks("optimizer config",
                               part({"lr", "min_lr", "warmup", "schedule", "beta1", "beta2", "eps",
                                     "weight_decay", "clip", "seed"}));
  // These decide when collectives happen (evaluations, ZeRO-1 checkpoint gathers,
  // replica checks): a mismatch would leave ranks waiting in different places.
  comm.check_same_on_all_ranks("distributed config",
                               nlohmann::json{{"zero", c.zero},
                                              {"sr_seed", c.sr_seed},
                                              {"replica_check", c.replica_check},
                                              {"eval_interval", c.eval_interval},
                                              {"eval_batches", c.eval_batches},
                                              {"final_eval", c.final_eval},
                                              {"ckpt_interval", c.ckpt_interval},
                                              {"save_final", c.save_final}}
                                   .dump());
}

void check_ranks_agree_on_data(Communicator& comm, const DataSplits& data) {
  if (comm.world_size() == 1) return;
  auto describe = [](const TokenData& t) {
    return nlohmann::json{{"tokens", t.tokens.size()},
                          {"vocab", t.vocab_size},
                          {"checksum", checksum_bytes(t.tokens.data(), t.tokens.size() * 2)}};
  };
  comm.check_same_on_all_ranks(
      "data", nlohmann::json{{"train", describe(data.train)}, {"val", describe(data.val)}}.dump());
}

void check_ranks_agree_on_start(Communicator& comm, uint64_t start_step) {
  if (comm.world_size() == 1) return;
  comm.check_same_on_all_ranks("resume step", std::to_string(start_step));
}

}  // namespace srkit
