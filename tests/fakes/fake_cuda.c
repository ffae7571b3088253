/* A stand-in for libcuda.so.1 (the CUDA driver API), for envdoctor's tests.
 *
 * Answers come from the key=value file named by FAKE_CUDA_CONFIG:
 *   init=804           cuInit's return code      init_hang=1 / init_crash=1 (fake_knobs.h)
 *   driver_version=12080   count=2   count_rc=0
 * Error names and strings are the ones cuda.h documents for each CUresult.
 */
#include <stddef.h>

#define FAKE_CONFIG_ENV "FAKE_CUDA_CONFIG"
#include "fake_knobs.h"

typedef int CUresult;

static int initialized = 0;

CUresult cuInit(unsigned int flags) {
    (void)flags;
    fake_knob_point("init");
    int rc = (int)fake_cfg_int("init", 0);
    if (rc == 0) initialized = 1;
    return rc;
}

/* Works before (and without) a successful cuInit, as the real one does. */
CUresult cuDriverGetVersion(int *v) {
    if (!v) return 1;
    *v = (int)fake_cfg_int("driver_version", 12080);
    return 0;
}

CUresult cuDeviceGetCount(int *n) {
    if (!initialized) return 3; /* CUDA_ERROR_NOT_INITIALIZED */
    int rc = (int)fake_cfg_int("count_rc", 0);
    if (rc) return rc;
    *n = (int)fake_cfg_int("count", 1);
    return 0;
}

struct err { int code; const char *name, *text; };
static const struct err ERRORS[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward compatibility was attempted on non supported HW"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static const struct err *find(int code) {
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
        if (ERRORS[i].code == code) return &ERRORS[i];
    return NULL;
}

CUresult cuGetErrorName(CUresult code, const char **out) {
    const struct err *e = find(code);
    if (!e) { *out = NULL; return 1; }
    *out = e->name;
    return 0;
}

CUresult cuGetErrorString(CUresult code, const char **out) {
    const struct err *e = find(code);
    if (!e) { *out = NULL; return 1; }
    *out = e->text;
    return 0;
}
