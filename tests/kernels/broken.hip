#include <hip/hip_runtime.h>

extern "C" __global__ void broken(float* x) {
    x[0] = undeclared_name;
}
