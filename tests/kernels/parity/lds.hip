// Parity corpus: static and dynamic LDS, barriers, a padded tile transpose.
#include <hip/hip_runtime.h>

extern "C" __global__ void block_sum_static(const float* in, float* out, unsigned n) {
    __shared__ float tile[256];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * 256 + t;
    tile[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned s = 128; s > 0; s >>= 1) {
        if (t < s) tile[t] += tile[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = tile[0];
}

extern "C" __global__ void block_sum_dynamic(const int* in, int* out, unsigned n) {
    extern __shared__ int sdata[];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + t;
    sdata[t] = i < n ? in[i] : 0;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sdata[t] += sdata[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = sdata[0];
}

template <int TILE>
__global__ void transpose(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    if (x < cols && y < rows) tile[threadIdx.y][threadIdx.x] = in[y * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    if (x < rows && y < cols) out[y * rows + x] = tile[threadIdx.x][threadIdx.y];
}
template __global__ void transpose<16>(const float*, float*, int, int);
template __global__ void transpose<32>(const float*, float*, int, int);

extern "C" __global__ void stencil_1d(const float* in, float* out, int n) {
    __shared__ float window[256 + 2];
    int g = blockIdx.x * 256 + threadIdx.x;
    int l = threadIdx.x + 1;
    window[l] = g < n ? in[g] : 0.0f;
    if (threadIdx.x == 0) window[0] = g > 0 ? in[g - 1] : 0.0f;
    if (threadIdx.x == 255) window[257] = g + 1 < n ? in[g + 1] : 0.0f;
    __syncthreads();
    if (g < n) out[g] = 0.25f * window[l - 1] + 0.5f * window[l] + 0.25f * window[l + 1];
}
