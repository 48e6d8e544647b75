// A kernel that needs scratch (private) memory: a local array indexed at run time.
#include <hip/hip_runtime.h>

extern "C" __global__ void uses_scratch(int* out, int k) {
    volatile int local[256];
    for (int i = 0; i < 256; ++i) local[i] = i * out[i];
    out[threadIdx.x] = local[(k + threadIdx.x) & 255];
}
