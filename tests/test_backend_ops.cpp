// The backend conformance suite (tests/conformance/backend_ops_suite.h) on the
// CPU backend: every op against its host references. The same suite runs on
// CUDA in tests/gpu/test_backend_ops_cuda.cpp.
#include "tests/conformance/backend_ops_suite.h"

SRKIT_INSTANTIATE_BACKEND_CONFORMANCE(cpu, "cpu");
