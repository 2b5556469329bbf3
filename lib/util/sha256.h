// SHA-256 (FIPS 180-4), to identify tokenizer files and models in the metadata
// sr-prep writes beside its shards. Own code: a strong hash is all that is needed
// and none of the project's dependencies offers one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace srkit {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t nbytes);
  void update(std::string_view bytes) { update(bytes.data(), bytes.size()); }
  // The digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> finish();
  // finish() as 64 lowercase hex digits.
  std::string finish_hex();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> block_{};
  size_t block_used_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view bytes);

// The digest of a file's bytes; throws naming the file if it cannot be read.
std::string sha256_file_hex(const std::string& path);

}  // namespace srkit
