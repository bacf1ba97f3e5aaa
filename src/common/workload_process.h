// Process settings shared by tarn's workloads (tarn-train, tarn-serve), from DESIGN.md's
// measured facts about BLAS threads, fresh memory and the instance's cores. Call them first
// thing in main, from the main thread.
#pragma once

namespace tarn {

// OpenBLAS threads fight libtorch's own (2 + 2 threads halve the speed), and OpenBLAS reads
// its thread count once, when the library loads, before main. So a process started without
// OPENBLAS_NUM_THREADS sets it to 1 and starts itself again (on failure it goes on).
void PinBlasThreads(char** argv);

// Fresh pages cost about 12 us each to touch on these machines, and glibc hands every
// allocation over 128 KiB (a batch, a gradient, a message) to mmap and back at free, so the
// same large buffers fault in again each time. Keeps them in the heap instead: both glibc
// thresholds fixed (setting only the trim threshold would also disable the dynamic mmap
// threshold and make it worse).
void KeepLargeBuffersInHeap();

// The instance's cores: $TARN_VCORES when set, else the machine's.
int InstanceCores();

}  // namespace tarn
