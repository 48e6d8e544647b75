// Kernels of known resource usage for hipjit's SM occupancy tests (code_object::occupancy):
// few registers and no shared memory, many registers, static shared memory.
extern "C" __global__ void light(float* x, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}

// 48 values kept live across the loop.
extern "C" __global__ void heavy(const float* x, float* y, unsigned n) {
    float acc[48];
#pragma unroll
    for (int k = 0; k < 48; ++k) acc[k] = x[threadIdx.x + k];
    for (unsigned i = 0; i < n; ++i) {
#pragma unroll
        for (int k = 0; k < 48; ++k) acc[k] = acc[k] * acc[(k + 1) % 48] + x[i + k];
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 48; ++k) s += acc[k];
    y[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// 32 KiB of static shared memory.
extern "C" __global__ void tiled(const float* x, float* y) {
    __shared__ float tile[8192];
    for (unsigned i = threadIdx.x; i < 8192; i += blockDim.x) tile[i] = x[i];
    __syncthreads();
    y[threadIdx.x] = tile[(threadIdx.x * 7) % 8192];
}
