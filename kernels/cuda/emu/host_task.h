// Host work in stream order, for the emulated libraries (cuBLASLt): the task
// runs after everything queued earlier on `stream` and before everything queued
// later, like a kernel. It runs as the body of a one-thread kernel, so on a
// worker thread's own stack (HIP-CPU gives a one-thread block no fiber) and may
// use the parallel algorithms. A task must not throw: validate before queueing.
#pragma once

#include <functional>

#include "kernels/cuda/stream.h"

namespace srkit::cuda::emu {

void enqueue_host_task(Stream stream, std::function<void()> task, const char* name);

}  // namespace srkit::cuda::emu
