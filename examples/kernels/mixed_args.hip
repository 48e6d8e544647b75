// Arguments of mixed types: a char, a double, a float4 and a 16-byte-aligned struct by value,
// then an output pointer. Each work-item writes one sum, so the host can check every argument
// arrived intact at its kernarg offset (char at 0, double at 8, float4 at 16, Params at 32,
// out at 48: `hipjit inspect` shows the layout).
#include <hip/hip_runtime.h>

struct alignas(16) Params {
    float scale;
    int count;
    double bias;
};

extern "C" __global__ void mixed_args(char c, double d, float4 v, Params p, double* out) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = c + d + v.x + 2.0 * v.y + 3.0 * v.z + 4.0 * v.w + p.scale * p.count + p.bias + i;
}
