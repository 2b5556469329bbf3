// How a backward op stores a gradient: replacing what the output buffer holds,
// or adding to it. A gradient with several contributions (the residual stream,
// the tied embedding, micro-batches of one optimizer step) takes the first one
// with kOverwrite and the rest with kAccumulate, so no buffer is cleared only to
// be added into. kOverwrite stores the contribution alone, rounded once, exactly
// what kAccumulate into a zero-filled buffer stores (up to the sign of a zero).
#pragma once

#include <cstdint>

namespace srkit {

enum class GradWrite : uint8_t { kOverwrite, kAccumulate };

}  // namespace srkit
