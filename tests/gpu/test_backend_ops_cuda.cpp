// The backend conformance suite (tests/conformance/backend_ops_suite.h) on the
// CUDA backend, against host references and the CPU backend (bit for bit where
// the design promises it, tolerances.h elsewhere). Every test skips with the
// runtime's reason while make_backend("cuda") cannot open a device.
#include "tests/conformance/backend_ops_suite.h"

SRKIT_INSTANTIATE_BACKEND_CONFORMANCE(cuda, "cuda");
