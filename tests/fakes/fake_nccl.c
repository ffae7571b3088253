/* A stand-in for libnccl.so.2, for envdoctor's tests.
 *
 *   -DNCCL_VERSION_CODE=22105   what ncclGetVersion reports (NCCL >= 2.9: major*10000 + minor*100 + patch;
 *                               older: major*1000 + minor*100 + patch, e.g. 2708)
 *   -DCRASH_ON_LOAD, -DHANG_ON_LOAD   see fake_knobs.h
 */
#include "fake_knobs.h"

#ifndef NCCL_VERSION_CODE
#define NCCL_VERSION_CODE 22105
#endif

typedef int ncclResult_t;

ncclResult_t ncclGetVersion(int *version) {
    if (!version) return 4; /* ncclInvalidArgument */
    *version = NCCL_VERSION_CODE;
    return 0;
}

const char *ncclGetErrorString(ncclResult_t result) {
    switch (result) {
    case 0: return "no error";
    case 4: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    default: return "unknown result code";
    }
}
