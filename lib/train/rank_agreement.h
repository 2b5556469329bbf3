// Start-up checks of a data-parallel run: every rank must train the same model
// with the same strategy, batch, optimizer, schedule and data, or the replicas
// would silently train different things (or hang in mismatched collectives).
// Each check is one Communicator::check_same_on_all_ranks call, named after the
// part of the config it covers, so a mismatch stops every rank with a one-line
// error such as "srkit: model differs between ranks: rank 1 differs from rank 0
// at byte 12 (rank 0 has "4,..." there)".
#pragma once

#include <cstdint>

#include "lib/comm/communicator.h"
#include "lib/data/token_data.h"
#include "lib/train/train_config.h"

namespace srkit {

// Model, strategy, batch, optimizer, evaluation/checkpoint schedule and the
// distributed settings. Call before loading data or allocating the model.
void check_ranks_agree_on_config(Communicator& comm, const TrainConfig& config);

// The training and validation tokens (source, sizes, checksum).
void check_ranks_agree_on_data(Communicator& comm, const DataSplits& data);

// The step a resumed run starts from (0: a fresh run).
void check_ranks_agree_on_start(Communicator& comm, uint64_t start_step);

}  // namespace srkit
