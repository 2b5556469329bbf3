#include "kernels/cuda/emu/host_task.h"

#include <memory>
#include <utility>

#include "kernels/cuda/launch.cuh"

namespace srkit::cuda::emu {
namespace {

__global__ void run_host_task(std::function<void()>* task) {
  const std::unique_ptr<std::function<void()>> owned(task);
  (*owned)();
}

}  // namespace

void enqueue_host_task(Stream stream, std::function<void()> task, const char* name) {
  auto owned = std::make_unique<std::function<void()>>(std::move(task));
  launch(run_host_task, 1, 1, 0, stream, name, owned.get());
  owned.release();  // the kernel deletes it
}

}  // namespace srkit::cuda::emu
