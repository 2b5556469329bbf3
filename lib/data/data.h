// The data layer in one include: token streams, llm.c shards, the synthetic
// corpus, and the training/evaluation window samplers.
#pragma once

#include "lib/data/bin_shard.h"
#include "lib/data/sampler.h"
#include "lib/data/synthetic.h"
#include "lib/data/token_data.h"
