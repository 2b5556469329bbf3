// Linked into every srkit program (not into the engine library: a library must
// not re-execute the process that links it).
//
// OpenMP threads that finished an op spin-wait by default (libgomp's "active"
// policy) on the very cores the next op's threads need; alternating OpenMP ops
// and BLAS calls, as every CPU training step does, then runs 2-3x slower
// (measured: d4 bf16-sr 333 vs 1040 tok/s on 2 cores). The policy is read once
// when libgomp loads, before main, so a program that did not choose one
// re-executes itself once with OMP_WAIT_POLICY=passive. Setting the variable
// (to any value, e.g. active) keeps the choice and skips the re-exec.
#include <unistd.h>

#include <cstdlib>

namespace {

__attribute__((constructor)) void prefer_passive_openmp_wait(int argc, char** argv, char**) {
  (void)argc;
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || argv == nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the default policy
}

}  // namespace
