// saxpy: y[i] = a * x[i] + y[i] for i < n, one element per work-item.
// Launch with a 1-D grid covering n (e.g. 256 work-items per block, ceil(n / 256) blocks).
#include <hip/hip_runtime.h>

extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y,
                                 unsigned int n) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
