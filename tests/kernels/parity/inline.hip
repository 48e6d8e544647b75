// Parity corpus: inlining. hipcc inlines every device function not marked noinline
// (-amdgpu-early-inline-all), however large; a noinline function and a recursive one stay calls.
#include <hip/hip_runtime.h>

__device__ float heavy(float x, const float* t, int n) {
    float acc = 0.f;
    for (int k = 0; k < n; ++k) {
        acc += sinf(x * t[k]) * cosf(acc + t[k]) + expf(-x * k) * logf(1.f + t[k] * t[k]);
        if (acc > 1e6f) acc = sqrtf(acc);
    }
    for (int k = 0; k < n; ++k) acc = fmaf(acc, tanf(t[k]), powf(x, t[k]));
    return acc;
}

extern "C" __global__ void many_calls(const float* in, const float* t, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = heavy(in[i], t, n) + heavy(in[i] * 2.f, t, n) * heavy(in[i] + 1.f, t, n + 1) -
             heavy(out[i], t + 1, n);
}

__device__ __attribute__((noinline)) float kept_call(float x) { return sinf(x) * x; }

__device__ int factorial(int n) { return n <= 1 ? 1 : n * factorial(n - 1); }

extern "C" __global__ void calls_kept(float* o, int* p) {
    o[threadIdx.x] = kept_call(o[threadIdx.x]);
    p[threadIdx.x] = factorial(p[threadIdx.x]);
}
