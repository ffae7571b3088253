/* A stand-in for libnvidia-ml.so.1, for envdoctor's tests (no GPU needed).
 *
 * It exports the symbols pynvml (nvidia-ml-py 13.x) looks up by name, with the argument and
 * struct layouts pynvml.py declares. Its answers come from a key=value file named by the
 * environment variable FAKE_NVML_CONFIG, read with plain C on first use:
 *
 *   init=18                 return code of nvmlInitWithFlags / nvmlInit_v2 (0 = success)
 *   init_hang=1             nvmlInit never returns (a wedged driver)        (fake_knobs.h)
 *   init_crash=1            nvmlInit dies of SIGSEGV                       (fake_knobs.h)
 *   init_exit=N             nvmlInit calls _exit(N-1) (init_exit=1: _exit(0)) (fake_knobs.h)
 *   shutdown_hang=1         nvmlShutdown never returns (everything else answers)
 *   driver_version=570.124.06   cuda_version=12080   count=2
 *   rc.<function>=N         every call of <function> returns N
 *   gpuI.rc.<function>=N    calls of <function> for GPU I return N
 *   gpuI.<field>=...        per-GPU answers (name, uuid, pci, cc, mem_total, ... see below)
 *
 * Build variants drop a symbol, as an older driver would: -DOMIT_<function>=1.
 */
#include <stdint.h>

#define FAKE_CONFIG_ENV "FAKE_NVML_CONFIG"
#include "fake_knobs.h"

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;

static const char *gcfg(int gpu, const char *field) {
    char key[128];
    snprintf(key, sizeof key, "gpu%d.%s", gpu, field);
    return fake_cfg(key);
}

static long long gint(int gpu, const char *field, long long dflt) {
    const char *v = gcfg(gpu, field);
    return v ? strtoll(v, NULL, 0) : dflt;
}

/* The configured return code of a call: per-GPU first, then global. */
static int rc_of(const char *fn, int gpu) {
    char key[160];
    if (gpu >= 0) {
        snprintf(key, sizeof key, "gpu%d.rc.%s", gpu, fn);
        if (fake_cfg(key)) return (int)strtol(fake_cfg(key), NULL, 0);
    }
    snprintf(key, sizeof key, "rc.%s", fn);
    return (int)fake_cfg_int(key, 0);
}

static int initialized = 0;

/* Handles: GPU i -> (i + 1); MIG device j of GPU i -> 0x10000 + i * 256 + j. */
static int gpu_of(nvmlDevice_t dev) {
    uintptr_t h = (uintptr_t)dev;
    if (h >= 0x10000) return (int)((h - 0x10000) / 256);
    return (int)h - 1;
}

static int count(void) { return (int)fake_cfg_int("count", 1); }

#define CHECK(fn, gpu)                                          \
    do {                                                        \
        if (!initialized) return 1; /* UNINITIALIZED */         \
        int _rc = rc_of(fn, gpu);                               \
        if (_rc) return _rc;                                    \
    } while (0)

#define DEV_CHECK(fn, dev)                                      \
    do {                                                        \
        int _g = gpu_of(dev);                                   \
        if (_g < 0 || _g >= count()) return 2; /* INVALID_ARGUMENT */ \
        CHECK(fn, _g);                                          \
    } while (0)

static nvmlReturn_t do_init(void) {
    fake_knob_point("init");
    int rc = (int)fake_cfg_int("init", 0);
    if (rc == 0) initialized = 1;
    return rc;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return do_init(); }
nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
nvmlReturn_t nvmlInit(void) { return do_init(); }
nvmlReturn_t nvmlShutdown(void) {
    if (fake_cfg_int("shutdown_hang", 0)) fake_hang();
    initialized = 0;
    return 0;
}

/* Texts as NVML's nvmlErrorString prints them (what nvidia-smi shows after
 * "Failed to initialize NVML: "). */
const char *nvmlErrorString(nvmlReturn_t rc) {
    switch (rc) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 15: return "GPU is lost";
    case 16: return "GPU requires restart";
    case 17: return "The operating system has blocked the request.";
    case 18: return "Driver/library version mismatch";
    case 999: return "Unknown Error";
    default: return "Unknown Error";
    }
}

static nvmlReturn_t put_str(char *buf, unsigned int len, const char *s) {
    if (strlen(s) + 1 > len) return 7; /* INSUFFICIENT_SIZE */
    memcpy(buf, s, strlen(s) + 1);
    return 0;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned int len) {
    CHECK("nvmlSystemGetDriverVersion", -1);
    const char *v = fake_cfg("driver_version");
    return put_str(buf, len, v ? v : "570.124.06");
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *buf, unsigned int len) {
    CHECK("nvmlSystemGetNVMLVersion", -1);
    const char *v = fake_cfg("driver_version");
    return put_str(buf, len, v ? v : "570.124.06");
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
    CHECK("nvmlSystemGetCudaDriverVersion", -1);
    *v = (int)fake_cfg_int("cuda_version", 12080);
    return 0;
}

#ifndef OMIT_nvmlSystemGetCudaDriverVersion_v2
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
    CHECK("nvmlSystemGetCudaDriverVersion_v2", -1);
    *v = (int)fake_cfg_int("cuda_version", 12080);
    return 0;
}
#endif

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
    CHECK("nvmlDeviceGetCount_v2", -1);
    *n = (unsigned int)count();
    return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *dev) {
    CHECK("nvmlDeviceGetHandleByIndex_v2", (int)i);
    if ((int)i >= count()) return 2;
    *dev = (nvmlDevice_t)(uintptr_t)(i + 1);
    return 0;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *buf, unsigned int len) {
    DEV_CHECK("nvmlDeviceGetName", dev);
    const char *v = gcfg(gpu_of(dev), "name");
    return put_str(buf, len, v ? v : "NVIDIA A100-SXM4-80GB");
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *buf, unsigned int len) {
    DEV_CHECK("nvmlDeviceGetUUID", dev);
    int g = gpu_of(dev);
    char def[96];
    snprintf(def, sizeof def, "GPU-%08d-1111-2222-3333-444444444444", g);
    const char *v = gcfg(g, "uuid");
    if ((uintptr_t)dev >= 0x10000) {
        char mig[96];
        snprintf(mig, sizeof mig, "MIG-%08d-aaaa-bbbb-cccc-%012d", g, (int)(((uintptr_t)dev - 0x10000) % 256));
        return put_str(buf, len, mig);
    }
    return put_str(buf, len, v ? v : def);
}

/* nvmlPciInfo_t as pynvml declares it (v3). */
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci) {
    DEV_CHECK("nvmlDeviceGetPciInfo_v3", dev);
    int g = gpu_of(dev);
    char def[32];
    snprintf(def, sizeof def, "00000000:%02X:00.0", 7 + g);
    const char *v = gcfg(g, "pci");
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "%s", v ? v : def);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%.15s", (v ? v : def) + 4);
    pci->bus = 7 + g;
    pci->pciDeviceId = (unsigned int)gint(g, "pci_device_id", 0x20B210DE);
    return 0;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t dev, int *major, int *minor) {
    DEV_CHECK("nvmlDeviceGetCudaComputeCapability", dev);
    const char *v = gcfg(gpu_of(dev), "cc");
    if (!v) v = "8.0";
    *major = atoi(v);
    const char *dot = strchr(v, '.');
    *minor = dot ? atoi(dot + 1) : 0;
    return 0;
}

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *m) {
    DEV_CHECK("nvmlDeviceGetMemoryInfo", dev);
    int g = gpu_of(dev);
    m->total = (unsigned long long)gint(g, "mem_total", 85899345920LL);
    m->used = (unsigned long long)gint(g, "mem_used", 4194304LL);
    m->free = m->total - m->used;
    return 0;
}

#define UINT_GETTER(fn, field, dflt)                                   \
    nvmlReturn_t fn(nvmlDevice_t dev, unsigned int *out) {             \
        DEV_CHECK(#fn, dev);                                           \
        *out = (unsigned int)gint(gpu_of(dev), field, dflt);           \
        return 0;                                                      \
    }

UINT_GETTER(nvmlDeviceGetArchitecture, "arch", 7)
UINT_GETTER(nvmlDeviceGetBrand, "brand", 14)
UINT_GETTER(nvmlDeviceGetPersistenceMode, "persistence", 1)
UINT_GETTER(nvmlDeviceGetComputeMode, "compute_mode", 0)
UINT_GETTER(nvmlDeviceGetRetiredPagesPendingStatus, "retired_pending", 0)
UINT_GETTER(nvmlDeviceGetCurrPcieLinkGeneration, "pcie_gen", 4)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkGeneration, "pcie_max_gen", 4)
UINT_GETTER(nvmlDeviceGetGpuMaxPcieLinkGeneration, "pcie_max_gen", 4)
UINT_GETTER(nvmlDeviceGetCurrPcieLinkWidth, "pcie_width", 16)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkWidth, "pcie_max_width", 16)
UINT_GETTER(nvmlDeviceGetPowerUsage, "power", 90000)
UINT_GETTER(nvmlDeviceGetEnforcedPowerLimit, "power_limit", 400000)
UINT_GETTER(nvmlDeviceGetMaxMigDeviceCount, "mig_max", 7)
UINT_GETTER(nvmlDeviceGetMinorNumber, "minor", 0)

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, unsigned int sensor, unsigned int *t) {
    (void)sensor;
    DEV_CHECK("nvmlDeviceGetTemperature", dev);
    *t = (unsigned int)gint(gpu_of(dev), "temp", 35);
    return 0;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *cur, unsigned int *pending) {
    DEV_CHECK("nvmlDeviceGetMigMode", dev);
    int g = gpu_of(dev);
    *cur = (unsigned int)gint(g, "mig", 0);
    *pending = (unsigned int)gint(g, "mig_pending", *cur);
    return 0;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int i, nvmlDevice_t *mig) {
    DEV_CHECK("nvmlDeviceGetMigDeviceHandleByIndex", dev);
    int g = gpu_of(dev);
    if ((long long)i >= gint(g, "mig_devices", 0)) return 6; /* NOT_FOUND: empty slot */
    *mig = (nvmlDevice_t)(uintptr_t)(0x10000 + g * 256 + i);
    return 0;
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t dev, unsigned int *cur, unsigned int *pending) {
    DEV_CHECK("nvmlDeviceGetEccMode", dev);
    int g = gpu_of(dev);
    *cur = (unsigned int)gint(g, "ecc", 1);
    *pending = (unsigned int)gint(g, "ecc_pending", *cur);
    return 0;
}

/* errorType 1 = uncorrected; counterType 0 = volatile, 1 = aggregate. */
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, unsigned int errorType, unsigned int counterType,
                                         unsigned long long *n) {
    DEV_CHECK("nvmlDeviceGetTotalEccErrors", dev);
    int g = gpu_of(dev);
    const char *field = errorType == 1 ? (counterType == 0 ? "ecc_volatile_unc" : "ecc_aggregate_unc")
                                       : (counterType == 0 ? "ecc_volatile_cor" : "ecc_aggregate_cor");
    *n = (unsigned long long)gint(g, field, 0);
    return 0;
}

#ifndef OMIT_nvmlDeviceGetRemappedRows
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corr, unsigned int *unc,
                                       unsigned int *pending, unsigned int *failure) {
    DEV_CHECK("nvmlDeviceGetRemappedRows", dev);
    int g = gpu_of(dev);
    *corr = (unsigned int)gint(g, "remap_corr", 0);
    *unc = (unsigned int)gint(g, "remap_unc", 0);
    *pending = (unsigned int)gint(g, "remap_pending", 0);
    *failure = (unsigned int)gint(g, "remap_failure", 0);
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetCurrentClocksEventReasons
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t dev, unsigned long long *r) {
    DEV_CHECK("nvmlDeviceGetCurrentClocksEventReasons", dev);
    *r = (unsigned long long)gint(gpu_of(dev), "clocks_reasons", 0);
    return 0;
}
#endif

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dev, unsigned long long *r) {
    DEV_CHECK("nvmlDeviceGetCurrentClocksThrottleReasons", dev);
    *r = (unsigned long long)gint(gpu_of(dev), "clocks_reasons", 0);
    return 0;
}

typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u) {
    DEV_CHECK("nvmlDeviceGetUtilizationRates", dev);
    int g = gpu_of(dev);
    u->gpu = (unsigned int)gint(g, "util_gpu", 0);
    u->memory = (unsigned int)gint(g, "util_mem", 0);
    return 0;
}

/* nvmlProcessInfo_v2_t == v3 in pynvml: pid, usedGpuMemory, gpuInstanceId, computeInstanceId. */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned int *n, nvmlProcessInfo_t *p) {
    DEV_CHECK("nvmlDeviceGetComputeRunningProcesses_v3", dev);
    unsigned int want = (unsigned int)gint(gpu_of(dev), "procs", 0);
    if (want == 0) { *n = 0; return 0; }
    if (p == NULL || *n < want) { *n = want; return 7; /* INSUFFICIENT_SIZE */ }
    for (unsigned int i = 0; i < want; i++) {
        p[i].pid = 1000 + i;
        p[i].usedGpuMemory = 1ULL << 30;
        p[i].gpuInstanceId = 0xFFFFFFFF;
        p[i].computeInstanceId = 0xFFFFFFFF;
    }
    *n = want;
    return 0;
}

/* nvmlGpuFabricInfo_v2_t (pynvml c_nvmlGpuFabricInfo_v2_t) and the v1 layout. */
typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    unsigned int status, cliqueId, state, healthMask;
} nvmlGpuFabricInfoV_t;

typedef struct {
    unsigned char clusterUuid[16];
    unsigned int status, cliqueId, state;
} nvmlGpuFabricInfo_t;

#ifndef OMIT_nvmlDeviceGetGpuFabricInfoV
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t dev, nvmlGpuFabricInfoV_t *f) {
    DEV_CHECK("nvmlDeviceGetGpuFabricInfoV", dev);
    int g = gpu_of(dev);
    memset(f->clusterUuid, 0, sizeof f->clusterUuid);
    f->state = (unsigned int)gint(g, "fabric_state", 0);
    f->status = (unsigned int)gint(g, "fabric_status", 0);
    f->cliqueId = 0;
    f->healthMask = 0;
    return 0;
}
#endif

nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t dev, nvmlGpuFabricInfo_t *f) {
    DEV_CHECK("nvmlDeviceGetGpuFabricInfo", dev);
    int g = gpu_of(dev);
    memset(f->clusterUuid, 0, sizeof f->clusterUuid);
    f->state = (unsigned int)gint(g, "fabric_state", 0);
    f->status = (unsigned int)gint(g, "fabric_status", 0);
    f->cliqueId = 0;
    return 0;
}
