// Output paths are checked before the work starts, so an unwritable path fails
// in the first second instead of after the training it should have saved.
// Errors are one line naming the flag and the path.
#pragma once

#include <string>

namespace srkit {

// Creates dir (and parents) if missing and checks that files can be created in
// it (by creating and removing an exclusive probe file). An empty dir is refused.
void prepare_output_dir(const std::string& flag, const std::string& dir);

// An output file: its directory must exist (nothing is created) and be
// writable, and the path must not be a directory. An existing file is fine
// (it will be replaced).
void check_output_file(const std::string& flag, const std::string& path);
// The same check as a message: "" when path is a good output file, else
// "PATH: what is wrong" (for command-line validators, which add the flag).
std::string output_file_problem(const std::string& path);

}  // namespace srkit
