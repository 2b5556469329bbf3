// Memory is checked before it is spent (docs/reliability.md): a run compares
// what it will allocate -- the memory model's exact figure for the backend's
// buffers, the loaded token stream, the host copy a checkpoint stages -- with
// what the machine has available, and refuses with one line giving both,
// instead of being killed by the OOM killer (exit 137, no message) or dying of
// std::bad_alloc part-way.
#pragma once

#include <cstdint>
#include <string>

#include "lib/train/memory_model.h"
#include "lib/train/train_config.h"
#include "lib/util/system_memory.h"

namespace srkit {

// Throws std::invalid_argument when need > have.bytes (have.bytes 0: unknown,
// nothing refused): "not enough memory for <what>: needs X (<breakdown>) but Y
// is available (<source>); <advice>".
void require_memory(const std::string& what, uint64_t need, const std::string& breakdown,
                    const AvailableMemory& have, const std::string& advice);

// The memory model's estimate for this run's configuration on one rank.
MemoryEstimate run_memory_estimate(const TrainConfig& config, int world);

// Host bytes a checkpoint stages: the weights and the whole optimizer state.
uint64_t checkpoint_staging_bytes(const MemoryEstimate& e, int world, int zero);

// "weights 1.2 GiB, grads 1.2 GiB, ..." for the non-zero terms.
std::string describe_estimate(const MemoryEstimate& e);

// Bytes with a binary unit, e.g. "1.5 GiB", "300.0 MiB".
std::string human_bytes(uint64_t bytes);

}  // namespace srkit
