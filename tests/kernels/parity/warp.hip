// Parity corpus: cross-lane operations (shuffles, ballots, popcount), wave-size aware code.
#include <hip/hip_runtime.h>

extern "C" __global__ void warp_reduce(const float* in, float* out) {
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    for (int offset = warpSize / 2; offset > 0; offset >>= 1) v += __shfl_down(v, offset);
    if (threadIdx.x % warpSize == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) / warpSize] = v;
}

extern "C" __global__ void butterfly_max(int* data) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = data[i];
    for (int mask = 1; mask < warpSize; mask <<= 1) v = max(v, __shfl_xor(v, mask));
    data[i] = v;
}

extern "C" __global__ void ballot_count(const int* flags, unsigned* counts) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long mask = __ballot(flags[i] != 0);
    if (threadIdx.x % warpSize == 0) counts[i / warpSize] = __popcll(mask);
}

extern "C" __global__ void prefix_within_wave(const int* in, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % warpSize;
    int v = in[i];
    for (int d = 1; d < warpSize; d <<= 1) {
        int up = __shfl_up(v, d);
        if (lane >= d) v += up;
    }
    out[i] = v;
}

extern "C" __global__ void any_all(const int* in, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int p = in[i] > 0;
    out[i] = (__any(p) ? 1 : 0) | (__all(p) ? 2 : 0);
}
