/*
 * hip-7.2-overlay: a stand-in for a ROCm 7.2+ header set, made by scripts/header-matrix.sh.
 *
 * No registry this project reaches offers HIP headers that declare the whole library API.
 * This file takes the place of hip/hip_runtime_api.h in a directory that otherwise mirrors
 * the HIP 7.1 set (the triton 3.9.0 wheel) file for file (symlinks). It includes the HIP 7.1
 * header unchanged (kept alongside as hip/hip_runtime_api.hip-7.1.h) and then declares the
 * two library-API functions HIP 7.1 lacks, with the signatures of the HIP runtime API
 * reference (ROCm 7.2):
 *   hipError_t hipLibraryEnumerateKernels(hipKernel_t* kernels, unsigned int numKernels,
 *                                         hipLibrary_t library);
 *   hipError_t hipKernelGetFunction(hipFunction_t* pFunc, hipKernel_t kernel);
 * Nothing else changes: hip/hip_version.h still says 7.1 (hip-sys decides by declaration,
 * never by version), and the other five library-API functions keep HIP 7.1's declarations.
 */
#ifndef HIPJIT_HIP_7_2_OVERLAY_HIP_RUNTIME_API_H
#define HIPJIT_HIP_7_2_OVERLAY_HIP_RUNTIME_API_H

#include "hip_runtime_api.hip-7.1.h"

#ifdef __cplusplus
extern "C" {
#endif

hipError_t hipLibraryEnumerateKernels(hipKernel_t* kernels, unsigned int numKernels,
                                      hipLibrary_t library);
hipError_t hipKernelGetFunction(hipFunction_t* pFunc, hipKernel_t kernel);

#ifdef __cplusplus
}
#endif

#endif
