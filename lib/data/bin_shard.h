// llm.c token shards (.bin): a header of 256 little-endian int32 -- [0] magic
// 20240520, [1] version 1, [2] token count, the rest zero -- followed by exactly
// `count` uint16 tokens. Data prepared for llm.c loads here unchanged.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lib/data/token_data.h"

namespace srkit {

constexpr int32_t kBinMagic = 20240520;
constexpr int32_t kBinVersion = 1;  // uint16 tokens (llm.c's GPT-2 format)
constexpr size_t kBinHeaderInts = 256;
constexpr size_t kBinHeaderBytes = kBinHeaderInts * sizeof(int32_t);

// One shard's tokens. Validates magic, version, a positive count and that the
// file size is exactly header + 2 * count; each error is one line naming the file.
std::vector<uint16_t> read_bin_shard(const std::string& path);

// A path or glob (files in sorted order), shards concatenated.
// vocab_size = max token + 1; source = the path, or the pattern and shard count.
TokenData load_bin_shards(const std::string& pattern);

// Writes a shard atomically (PATH.tmp, fsync, rename). Refuses an empty token
// list or more tokens than the int32 header count can hold.
void write_bin_shard(const std::string& path, std::span<const uint16_t> tokens);

}  // namespace srkit
