// One 64-bit checksum of a byte range, for every place that compares bytes by
// a short fingerprint: the replica audit (ranks compare their weights), the
// per-tensor checksums stored in checkpoints, and the token checksums ranks
// agree on before training.
#pragma once

#include <cstddef>
#include <cstdint>

namespace srkit {

// XXH64 with seed 0 (the xxHash specification; `xxhsum -H64` prints the same
// value): four independent multiply-rotate lanes over 32-byte stripes, so it
// runs near memory speed on one core, then a final avalanche in which every
// input bit affects every output bit. Equal bytes give equal checksums on
// every machine (the input is read as little-endian words).
uint64_t checksum_bytes(const void* data, size_t bytes);

}  // namespace srkit
