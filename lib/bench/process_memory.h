// Resident memory of this process as the kernel sees it (Linux /proc), next to
// the backend's own accounting: it adds what the backend does not allocate
// (BLAS and OpenMP buffers, the data set, the allocator's slack).
#pragma once

#include <cstddef>

namespace srkit {

// VmHWM of /proc/self/status: the peak resident set since the process started
// or since the last successful reset_peak_rss(). 0 where unavailable.
size_t peak_rss_bytes();

// Resets VmHWM to the current resident set ("5" written to
// /proc/self/clear_refs, Linux >= 4.0), so the next peak_rss_bytes() covers
// only what runs after it. False where the kernel refuses: the peak is then
// cumulative over the whole process.
bool reset_peak_rss();

}  // namespace srkit
