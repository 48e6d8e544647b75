// Parity corpus, host programs: kernels with a host launcher (triple-chevron launch, the HIP
// host API, the C library's printf on the host), as a library would ship them.
#include <hip/hip_runtime.h>

#include <cstdio>

__global__ void fill(int* x, int value, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = value;
}

__global__ void scale(int* x, int factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= factor;
}

int fill_and_scale(int* device, int n) {
    fill<<<(n + 255) / 256, 256>>>(device, 7, n);
    scale<<<(n + 255) / 256, 256>>>(device, 3, n);
    if (hipDeviceSynchronize() != hipSuccess) {
        std::printf("launch failed: %s\n", hipGetErrorString(hipGetLastError()));
        return 1;
    }
    return 0;
}
