#include <hip/hip_runtime.h>
// A const __restrict__ input, a written output, a const input without __restrict__, a scalar.
extern "C" __global__ void access(const float* __restrict__ x, float* __restrict__ y,
                                  const float* w, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + w[i];
}
