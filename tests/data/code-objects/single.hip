// One small kernel: the smallest real code object, for truncation and bit-flip tests.
#include <hip/hip_runtime.h>

extern "C" __global__ void add_one(int* x) { x[threadIdx.x] += 1; }
