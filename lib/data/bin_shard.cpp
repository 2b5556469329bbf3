#include "lib/data/bin_shard.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>

#include "lib/util/atomic_file.h"
#include "lib/util/format.h"
#include "lib/util/glob.h"
#include "lib/util/regular_file.h"
#include "lib/util/stop_signal.h"

namespace srkit {

// The format is little-endian; reading it straight into memory assumes the host is too.
static_assert(std::endian::native == std::endian::little, "llm.c .bin I/O assumes little endian");

namespace {

std::runtime_error shard_error(const std::string& path, const std::string& what) {
  return std::runtime_error("token shard '" + printable(path) + "': " + what);
}

}  // namespace

std::vector<uint16_t> read_bin_shard(const std::string& path) {
  const RegularFile file(path, "token shard");
  const uintmax_t size = file.size();
  if (size == 0) throw shard_error(path, "file is empty (expected a 1024-byte llm.c header)");
  if (size < kBinHeaderBytes) {
    throw shard_error(
        path, strprintf("file has %ju bytes, shorter than the 1024-byte llm.c header", size));
  }
  int32_t header[kBinHeaderInts];
  file.read_at(0, header, sizeof(header), "the header");
  if (header[0] != kBinMagic)
    throw shard_error(path, strprintf("bad magic %d (expected %d)", header[0], kBinMagic));
  if (header[1] != kBinVersion) {
    throw shard_error(path, strprintf("unsupported version %d (expected %d: uint16 tokens)",
                                      header[1], kBinVersion));
  }
  const int32_t count = header[2];
  if (count <= 0)
    throw shard_error(path, strprintf("header token count is %d (expected at least 1)", count));
  const uintmax_t expected = kBinHeaderBytes + uintmax_t(count) * sizeof(uint16_t);
  if (size < expected) {
    throw shard_error(
        path, strprintf("truncated: %ju bytes, expected %ju for %d tokens", size, expected, count));
  }
  if (size > expected) {
    throw shard_error(path, strprintf("%ju extra bytes after %d tokens (expected %ju bytes)",
                                      size - expected, count, expected));
  }
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  file.read_at(kBinHeaderBytes, tokens.data(), tokens.size() * sizeof(uint16_t), "the tokens");
  return tokens;
}

TokenData load_bin_shards(const std::string& pattern) {
  const std::vector<std::string> files = glob_files(pattern);
  TokenData out;
  for (const std::string& file : files) {
    throw_if_stopped("loading the data");  // between shards: a long load stops promptly
    const std::vector<uint16_t> shard = read_bin_shard(file);
    out.tokens.insert(out.tokens.end(), shard.begin(), shard.end());
  }
  out.vocab_size = int(*std::max_element(out.tokens.begin(), out.tokens.end())) + 1;
  out.source = files.size() == 1 ? files.front()
                                 : strprintf("%s (%zu shards)", pattern.c_str(), files.size());
  return out;
}

void write_bin_shard(const std::string& path, std::span<const uint16_t> tokens) {
  if (tokens.empty()) throw shard_error(path, "refusing to write a shard with no tokens");
  if (tokens.size() > size_t(std::numeric_limits<int32_t>::max())) {
    throw shard_error(path, strprintf("%zu tokens exceed the int32 header count", tokens.size()));
  }
  int32_t header[kBinHeaderInts] = {};
  header[0] = kBinMagic;
  header[1] = kBinVersion;
  header[2] = int32_t(tokens.size());
  AtomicFileWriter w(path);
  w.write(header, sizeof(header));
  w.write(tokens.data(), tokens.size_bytes());
  w.commit();
}

}  // namespace srkit
