// The same kernel as single.hip, for CUDA: a real cubin and fatbin that the AMDGPU
// code-object reader must reject by name.
extern "C" __global__ void add_one(int* x) { x[threadIdx.x] += 1; }
