// Kernels for hipjit's code-object reader tests: mixed argument types, several kernels in one
// source, a template behind extern "C" wrappers, kernels without extern "C" (plain, template,
// namespaced) and one using LDS.
#include <hip/hip_runtime.h>

// A 16-byte-aligned struct passed by value.
struct alignas(16) Params {
    float scale;
    int count;
    double bias;
};

extern "C" __global__ void mixed(char c, double d, int2 v2, float4 v4, Params p, float* out,
                                 const int* in) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = c + d + v2.x + v2.y + v4.x + v4.w + p.scale * p.count + p.bias + in[i];
}

template <typename T>
__device__ void axpy_impl(T a, const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void axpy_f32(float a, const float* x, float* y, int n) {
    axpy_impl(a, x, y, n);
}

extern "C" __global__ void axpy_f64(double a, const double* x, double* y, int n) {
    axpy_impl(a, x, y, n);
}

// Uses static LDS: group_segment_fixed_size is 256 * 4 bytes.
extern "C" __global__ void block_sum(const float* in, float* out) {
    __shared__ float tile[256];
    tile[threadIdx.x] = in[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    for (unsigned s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = tile[0];
}

// Not extern "C": its name in the code object is mangled (_Z5scalePdd).
__global__ void scale(double* x, double a) { x[threadIdx.x] *= a; }

// A template kernel instantiated without extern "C": named _Z4fillIfEvPT_S0_i.
template <typename T>
__global__ void fill(T* out, T value, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = value;
}
template __global__ void fill<float>(float*, float, int);

namespace ops {
// A kernel in a namespace: _ZN3ops4reluEPfi.
__global__ void relu(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] < 0.0f) x[i] = 0.0f;
}
}  // namespace ops
