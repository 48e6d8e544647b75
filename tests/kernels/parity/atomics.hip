// Parity corpus: global and LDS atomics, a compare-and-swap loop, device functions.
#include <hip/hip_runtime.h>

extern "C" __global__ void histogram(const unsigned char* in, unsigned* bins, unsigned n) {
    __shared__ unsigned local[256];
    local[threadIdx.x] = 0;
    __syncthreads();
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[in[i]], 1u);
    __syncthreads();
    atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}

extern "C" __global__ void float_sum(const float* in, float* total, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(total, in[i]);
}

__device__ float atomic_max_float(float* addr, float value) {
    int* as_int = reinterpret_cast<int*>(addr);
    int old = *as_int;
    while (__int_as_float(old) < value) {
        int assumed = old;
        old = atomicCAS(as_int, assumed, __float_as_int(value));
        if (old == assumed) break;
    }
    return __int_as_float(old);
}

extern "C" __global__ void max_reduce(const float* in, float* result, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomic_max_float(result, in[i]);
}

extern "C" __global__ void counters(int* lo, unsigned long long* wide, int* mx) {
    atomicSub(lo, 1);
    atomicAdd(wide, 1ull);
    atomicMax(mx, static_cast<int>(threadIdx.x));
    atomicOr(lo + 1, 1 << (threadIdx.x % 31));
}
