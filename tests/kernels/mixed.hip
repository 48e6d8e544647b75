// Several kernels with mixed argument types, a template behind extern "C" wrappers and one
// kernel without extern "C" (its symbol is mangled).
#include <hip/hip_runtime.h>

struct alignas(16) Params {
    float scale;
    int count;
    double bias;
};

extern "C" __global__ void mixed_args(char c, double d, int2 v, float4 f, Params p,
                                      float* out, const int* in) {
    int i = threadIdx.x;
    out[i] = c + (float)d + v.x + v.y + f.x + f.w + p.scale * p.count + (float)p.bias + in[i];
}

template <typename T>
__device__ void axpy_impl(T a, const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void axpy_f32(float a, const float* x, float* y, int n) {
    axpy_impl<float>(a, x, y, n);
}

extern "C" __global__ void axpy_f64(double a, const double* x, double* y, int n) {
    axpy_impl<double>(a, x, y, n);
}

__global__ void not_extern_c(int* out) { out[threadIdx.x] = threadIdx.x; }
