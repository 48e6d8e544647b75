// Parity corpus: device-library calls (inlined or not), double precision, integer math,
// a recursive-looking device function, constant memory.
#include <hip/hip_runtime.h>

__constant__ float coefficients[4] = {1.0f, 0.5f, 0.25f, 0.125f};

extern "C" __global__ void transcendental(const float* in, float* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = sinf(in[i]) * expf(-in[i]) + sqrtf(fabsf(in[i]));
}

extern "C" __global__ void polynomial(const float* in, float* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i], acc = 0.0f;
    for (int k = 3; k >= 0; --k) acc = acc * x + coefficients[k];
    out[i] = acc;
}

extern "C" __global__ void dgemv_row(const double* a, const double* x, double* y, int cols) {
    int row = blockIdx.x;
    double acc = 0.0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) acc = fma(a[row * cols + c], x[c], acc);
    atomicAdd(&y[row], acc);
}

extern "C" __global__ void int_math(const int* a, const int* b, int* q, int* r, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && b[i] != 0) {
        q[i] = a[i] / b[i];
        r[i] = a[i] % b[i];
    }
}

template <typename T, int N>
__global__ void unrolled_dot(const T* a, const T* b, T* out) {
    T acc = T(0);
#pragma unroll
    for (int k = 0; k < N; ++k) acc += a[threadIdx.x * N + k] * b[threadIdx.x * N + k];
    out[threadIdx.x] = acc;
}
template __global__ void unrolled_dot<float, 8>(const float*, const float*, float*);
template __global__ void unrolled_dot<double, 4>(const double*, const double*, double*);
