// How sr-train ends on an error.
#pragma once

#include "lib/comm/communicator.h"

namespace srkit {

// Prints "sr-train: <what>" (with "[rank r] " on a job of several ranks) and
// returns code. In a job of several ranks the process instead ends at once
// with code, without finalising MPI: the other ranks may be waiting in a
// collective for this one, and a rank that leaves without MPI_Finalize makes
// the launcher (mpirun, srun) end the whole job right away, where a clean exit
// would leave them waiting until --comm-timeout.
int fail(const Communicator* comm, const char* what, int code);

}  // namespace srkit
