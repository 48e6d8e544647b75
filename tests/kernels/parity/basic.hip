// Parity corpus: plain arithmetic, templates (C++-mangled names), structs by value, half,
// launch bounds, several kernels in one file.
#include <hip/hip_runtime.h>
// hipRTC 5.2.3 carries the half types itself: including hip_fp16.h there redefines __half_raw.
#ifndef __HIPCC_RTC__
#include <hip/hip_fp16.h>
#endif

extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

template <typename T>
__global__ void vadd(const T* a, const T* b, T* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
template __global__ void vadd<float>(const float*, const float*, float*, int);
template __global__ void vadd<double>(const double*, const double*, double*, int);
template __global__ void vadd<int>(const int*, const int*, int*, int);

struct Affine {
    float scale;
    float shift;
    int clamp_lo;
    int clamp_hi;
};

extern "C" __global__ void affine(Affine p, const float* in, int* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = static_cast<int>(in[i] * p.scale + p.shift);
    out[i] = v < p.clamp_lo ? p.clamp_lo : (v > p.clamp_hi ? p.clamp_hi : v);
}

extern "C" __global__ void half_axpy(__half a, const __half* x, __half* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __hadd(__hmul(a, x[i]), y[i]);
}

extern "C" __global__ void __launch_bounds__(128) bounded_scale(float* x, float s) {
    x[blockIdx.x * 128 + threadIdx.x] *= s;
}

namespace ops {
__global__ void strided_copy(const float4* __restrict__ in, float4* __restrict__ out, int stride, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i * stride];
}
}  // namespace ops
