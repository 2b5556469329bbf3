// The processes of sr-bench sweep: each cell (and each numerics probe) trains in
// a child of its own (fork, then the Trainer runs in the child), so runs never
// share threads, memory or a crash. A child dies with its parent
// (PR_SET_PDEATHSIG): a killed sweep leaves no orphan training on. The parent
// never runs OpenMP, BLAS or CUDA code itself, which keeps fork safe.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

namespace srkit {

// Forks a child whose stdout and stderr go to output_file (its folder is
// created), runs body there, and exits with body's code (1 with the message
// on an exception; an Interrupted gives 130). Returns the child's pid; throws
// std::runtime_error when fork fails. Flush stdio before calling.
pid_t start_child(const std::string& dir, const std::string& output_file,
                  const std::function<int()>& body);

// The last non-empty line a child wrote (its reason when it failed), or "no output".
std::string last_line_of(const std::string& output_file);

}  // namespace srkit
