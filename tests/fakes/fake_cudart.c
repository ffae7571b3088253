/* A stand-in for libcudart.so.N (the CUDA runtime API), for envdoctor's tests.
 *
 * Answers are fixed at compile time, so each variant is its own file like a real install:
 *   -DCUDART_VERSION=12040       what cudaRuntimeGetVersion reports (major*1000 + minor*10)
 *   -DDEVICE_COUNT_RESULT=35     cudaGetDeviceCount's error (35 insufficient driver, 100 no device, 0 ok)
 *   -DDEVICE_COUNT=1             devices reported when the result is 0
 *   -DCRASH_ON_LOAD, -DHANG_ON_LOAD   see fake_knobs.h
 *   -DNO_VERSION_FUNCTION        leave cudaRuntimeGetVersion out
 * Error strings are the ones cuda_runtime_api.h documents for each cudaError_t.
 */
#include "fake_knobs.h"

#ifndef CUDART_VERSION
#define CUDART_VERSION 12040
#endif
#ifndef DEVICE_COUNT_RESULT
#define DEVICE_COUNT_RESULT 35
#endif
#ifndef DEVICE_COUNT
#define DEVICE_COUNT 1
#endif

typedef int cudaError_t;

#ifndef NO_VERSION_FUNCTION
cudaError_t cudaRuntimeGetVersion(int *version) {
    if (!version) return 1; /* cudaErrorInvalidValue */
    *version = CUDART_VERSION;
    return 0;
}
#endif

cudaError_t cudaDriverGetVersion(int *version) {
    if (!version) return 1;
    *version = DEVICE_COUNT_RESULT == 35 ? 0 : 12080; /* 0: no driver installed */
    return 0;
}

cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) return 1;
    *count = DEVICE_COUNT_RESULT == 0 ? DEVICE_COUNT : 0;
    return DEVICE_COUNT_RESULT;
}

const char *cudaGetErrorString(cudaError_t error) {
    switch (error) {
    case 0: return "no error";
    case 35: return "CUDA driver version is insufficient for CUDA runtime version";
    case 100: return "no CUDA-capable device is detected";
    case 802: return "system not yet initialized";
    case 804: return "forward compatibility was attempted on non supported HW";
    default: return "unrecognized error code";
    }
}

const char *cudaGetErrorName(cudaError_t error) {
    switch (error) {
    case 0: return "cudaSuccess";
    case 35: return "cudaErrorInsufficientDriver";
    case 100: return "cudaErrorNoDevice";
    case 802: return "cudaErrorSystemNotReady";
    case 804: return "cudaErrorCompatNotSupportedOnDevice";
    default: return "cudaErrorUnknown";
    }
}
