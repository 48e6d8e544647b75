// Block-wide reductions of the row softmax, over `blockDim.x` threads (a power of two), through
// `scratch` (blockDim.x floats of LDS).
#pragma once

__device__ inline float block_reduce_max(float v, float* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + s]);
        __syncthreads();
    }
    float r = scratch[0];
    __syncthreads();
    return r;
}

__device__ inline float block_reduce_sum(float v, float* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    float r = scratch[0];
    __syncthreads();
    return r;
}
