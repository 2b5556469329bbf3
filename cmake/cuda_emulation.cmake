# SRKIT_CUDA_EMU: every CUDA source compiles as host C++ against the HIP CPU
# runtime (header-only; kernels run on CPU threads) through the project's
# mapping header kernels/cuda/compat.cuh. cuBLASLt and NCCL are replaced by the
# CPU implementations in kernels/cuda/emu/ (their headers in emu/include, found
# as <cublasLt.h> and <nccl.h>). See docs/cuda-emulation.md.
if(NOT EXISTS "${SRKIT_HIP_CPU_DIR}/include/hip/hip_runtime.h")
  # NOTICE prints the line as it is (FATAL_ERROR would wrap it).
  message(NOTICE "srkit: SRKIT_CUDA_EMU needs the HIP CPU runtime, not found in ${SRKIT_HIP_CPU_DIR}: clone https://github.com/ROCm/HIP-CPU and pass -DSRKIT_HIP_CPU_DIR=<its folder> (make test-emu HIP_CPU_DIR=<its folder>)")
  message(FATAL_ERROR "the HIP CPU runtime is missing (see the line above)")
endif()
# HIP-CPU runs blocks through the C++17 parallel algorithms, which libstdc++
# implements with TBB (Debian: libtbb-dev).
find_package(TBB REQUIRED)

add_library(srkit_cuda_emulation INTERFACE)
# The emulated headers come before any CUDA toolkit include folder (NVTX's),
# which also holds the real cublasLt.h and nccl.h.
target_include_directories(srkit_cuda_emulation BEFORE INTERFACE
                           ${CMAKE_SOURCE_DIR}/kernels/cuda/emu/include)
target_include_directories(srkit_cuda_emulation SYSTEM INTERFACE ${SRKIT_HIP_CPU_DIR}/include)
target_link_libraries(srkit_cuda_emulation INTERFACE TBB::tbb)
set(SRKIT_HAVE_CUDA ON)
