// Checkpoint file naming inside a run directory: DIR/ckpt_<step>.safetensors,
// the step zero-padded to 8 digits (ckpt_00001000.safetensors; steps of 10^8 and
// more simply get more digits). Padding keeps `ls` in step order; lookups parse
// the number, so ordering never depends on the width.
#pragma once

#include <cstdint>
#include <string>

namespace srkit {

std::string checkpoint_path(const std::string& dir, uint64_t step);

// Whether a file name (no folder) has the form above.
bool is_checkpoint_file_name(const std::string& name);

// The checkpoint with the highest step in dir, or "" when dir holds none.
// Only names of exactly the form above count (PATH.tmp leftovers of an
// interrupted write are ignored). Throws naming dir if it is not a directory.
std::string latest_checkpoint(const std::string& dir);

}  // namespace srkit
