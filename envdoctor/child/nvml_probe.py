"""Child: read the driver and every GPU through NVML (stdlib + pynvml from nvidia-ml-py).

Run with envdoctor's own interpreter (it depends on nvidia-ml-py; the target may not have it).
Every NVML function is called through one choke point, :func:`call`, by name (nvitop's design),
which announces a ``stage`` first, so a call that hangs in the driver says which one it was, and
turns each ``NVMLError`` into ``{"code", "name", "reason", "message"}``. A failing per-GPU field
is recorded under the GPU's ``missing`` map and the rest is still read.
"""

import os as _os
import sys as _sys

# The script's own folder holds _edchild and its siblings; PYTHONSAFEPATH=1 (or -P, -I) leaves it
# off sys.path, and the child must still start (never a "No module named '_edchild'").
_HERE = _os.path.dirname(_os.path.abspath(__file__))
if _HERE not in _sys.path[:1]:
    _sys.path.insert(0, _HERE)

import sys

from _edchild import append, args, cleanup, done, emit, error_text, exit_now, mapped, stage

# NVML return codes (nvml.h) -> (symbolic name, envdoctor reason), from envdoctor/data/errors.json:
# the parent passes the table in this script's JSON arguments ({"codes": {"9": [name, reason]}}),
# since a child script cannot import envdoctor. The reason is what a user can act on: "absent"
# (nothing to talk to), "denied", "unsupported" (this GPU/driver does not offer it: degrade),
# "failed" (it should work and does not). Run without the table, a code is named by its number.
CODES = {}

GPU_IS_LOST = 15
NOT_FOUND = 6
FUNCTION_NOT_FOUND = 13

pynvml = None


class Failure(Exception):
    def __init__(self, info):
        Exception.__init__(self, info.get("message", ""))
        self.info = info


def describe(code, fallback=""):
    """The error as NVML's own nvmlErrorString words it (what nvidia-smi prints), else pynvml's."""
    name, reason = CODES.get(code, ("NVML_ERROR_%d" % code, "failed"))
    message = ""
    if code != 12:  # with no library loaded there is nobody to ask
        try:
            message = text(pynvml.nvmlErrorString(code))
        except Exception:
            message = ""
    return {"code": code, "name": name, "reason": reason, "message": message or fallback or name}


def call(name, *fargs):
    """The one place NVML is called. Returns the value or raises Failure with the explained error."""
    stage(name)
    fn = getattr(pynvml, name, None)
    if fn is None:  # bindings older than this function
        raise Failure({"code": FUNCTION_NOT_FOUND, "name": "NVML_ERROR_FUNCTION_NOT_FOUND",
                       "reason": "unsupported", "message": "pynvml has no %s" % name})
    try:
        return fn(*fargs)
    except pynvml.NVMLError as exc:
        code = getattr(exc, "value", 999)
        try:
            fallback = str(exc)
        except Exception:
            fallback = ""
        raise Failure(describe(code, fallback)) from None
    except Exception as exc:  # NVMLLibraryMismatchError, ctypes errors
        if exc.__class__.__name__ == "NVMLLibraryMismatchError":
            raise Failure({"code": FUNCTION_NOT_FOUND, "name": "NVML_ERROR_FUNCTION_NOT_FOUND",
                           "reason": "unsupported", "message": str(exc)}) from None
        raise Failure({"code": None, "name": type(exc).__name__, "reason": "failed",
                       "message": error_text(exc)}) from None


def first(names, *fargs):
    """Call the first of ``names`` the driver exports (newest first): newer bindings on an older
    driver degrade to the older function instead of failing."""
    last = None
    for name in names:
        try:
            return call(name, *fargs)
        except Failure as exc:
            if exc.info.get("code") != FUNCTION_NOT_FOUND:
                raise
            last = exc
    raise last


def text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class Gpu(object):
    """Collects one GPU's fields; a field that fails lands in ``missing`` with its reason."""

    def __init__(self, index, handle):
        self.index = index
        self.handle = handle
        self.data = {"index": index, "missing": {}}
        self.lost = False

    def read(self, field, fn, *fargs, **kw):
        if self.lost:
            self.data["missing"][field] = {"reason": "failed", "name": "NVML_ERROR_GPU_IS_LOST",
                                           "detail": "not read: the GPU was lost earlier"}
            return None
        names = fn if isinstance(fn, (list, tuple)) else [fn]
        try:
            value = first(names, self.handle, *fargs)
        except Failure as exc:
            info = exc.info
            if info.get("code") == GPU_IS_LOST:
                self.lost = True
                self.data["lost"] = True
            detail = "%s: %s" % (info.get("name"), info.get("message"))
            if info.get("code") == FUNCTION_NOT_FOUND:
                detail = "%s is not exported by this driver (older than the bindings)" % names[-1]
            self.data["missing"][field] = {"reason": info.get("reason", "failed"), "name": info.get("name"),
                                           "detail": detail}
            return None
        convert = kw.get("convert")
        value = convert(value) if convert else value
        if kw.get("store", True):
            self.data[field] = value
        return value


def read_mig(g, handle):
    """MIG mode, and the UUIDs of the MIG instances when it is on."""
    mig = g.read("mig_mode", "nvmlDeviceGetMigMode", store=False)
    if mig is not None:
        g.data["mig_mode"] = {"current": int(mig[0]), "pending": int(mig[1])}
        if int(mig[0]) == 1:
            mig_uuids = []
            slots = g.read("mig_max", "nvmlDeviceGetMaxMigDeviceCount", store=False) or 0
            for slot in range(int(slots)):
                try:
                    mh = call("nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
                except Failure as exc:
                    if exc.info.get("code") == NOT_FOUND:  # an empty slot
                        continue
                    g.data["missing"]["mig_devices"] = {"reason": exc.info["reason"], "name": exc.info["name"],
                                                        "detail": exc.info["message"]}
                    break
                try:
                    mig_uuids.append(text(call("nvmlDeviceGetUUID", mh)))
                except Failure:
                    mig_uuids.append(None)
            g.data["mig_devices"] = mig_uuids
    else:
        g.data["missing"]["mig_mode"] = g.data["missing"].pop("mig_mode", {"reason": "failed", "detail": ""})


def read_memory_health(g):
    """ECC mode and uncorrectable error counts, page retirement and row remapping."""
    ecc = g.read("ecc_mode", "nvmlDeviceGetEccMode", store=False)
    if ecc is not None:
        g.data["ecc_mode"] = {"current": int(ecc[0]), "pending": int(ecc[1])}
        if int(ecc[0]) == 1:
            # NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1; NVML_VOLATILE_ECC = 0 (since the last driver
            # load), NVML_AGGREGATE_ECC = 1 (lifetime, kept in the infoROM).
            g.read("ecc_uncorrected_volatile", "nvmlDeviceGetTotalEccErrors", 1, 0, convert=int)
            g.read("ecc_uncorrected_aggregate", "nvmlDeviceGetTotalEccErrors", 1, 1, convert=int)
    # Page retirement is the pre-Ampere mechanism; Ampere and newer remap rows instead, and
    # each answers NOT_SUPPORTED for the other one.
    g.read("retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus", convert=int)
    rows = g.read("remapped_rows", "nvmlDeviceGetRemappedRows", store=False)
    if rows is not None:
        g.data["remapped_rows"] = {"correctable": int(rows[0]), "uncorrectable": int(rows[1]),
                                   "pending": int(rows[2]), "failure": int(rows[3])}


def read_pcie(g):
    """The PCIe link as trained now and at most."""
    pcie = {}
    for key, fn in (("gen", "nvmlDeviceGetCurrPcieLinkGeneration"), ("max_gen", "nvmlDeviceGetMaxPcieLinkGeneration"),
                    ("width", "nvmlDeviceGetCurrPcieLinkWidth"), ("max_width", "nvmlDeviceGetMaxPcieLinkWidth")):
        value = g.read("pcie_" + key, fn, store=False)
        if value is not None:
            pcie[key] = int(value)
    if pcie:
        g.data["pcie"] = pcie


def read_gpu(index):
    try:
        handle = call("nvmlDeviceGetHandleByIndex", index)
    except Failure as exc:
        return {"index": index, "error": exc.info, "missing": {}}
    g = Gpu(index, handle)
    g.read("name", "nvmlDeviceGetName", convert=text)
    g.read("uuid", "nvmlDeviceGetUUID", convert=text)
    g.read("pci_bus_id", "nvmlDeviceGetPciInfo", convert=lambda p: text(p.busId))
    g.read("compute_capability", "nvmlDeviceGetCudaComputeCapability", convert=lambda cc: "%d.%d" % tuple(cc))
    mem = g.read("memory", "nvmlDeviceGetMemoryInfo", store=False)
    if mem is not None:
        g.data["memory_total"] = int(mem.total)
        g.data["memory_used"] = int(mem.used)
    else:
        g.data["missing"]["memory_total"] = g.data["missing"]["memory_used"] = g.data["missing"].pop("memory")
    g.read("architecture", "nvmlDeviceGetArchitecture", convert=int)
    g.read("brand", "nvmlDeviceGetBrand", convert=int)
    g.read("persistence_mode", "nvmlDeviceGetPersistenceMode", convert=int)
    g.read("compute_mode", "nvmlDeviceGetComputeMode", convert=int)

    read_mig(g, handle)
    read_memory_health(g)
    read_pcie(g)
    # "Throttle reasons" were renamed "clocks event reasons" in driver 535; older drivers only
    # export the old name.
    g.read("clocks_event_reasons",
           ["nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"], convert=int)
    g.read("temperature", "nvmlDeviceGetTemperature", 0, convert=int)  # NVML_TEMPERATURE_GPU
    g.read("power_usage_mw", "nvmlDeviceGetPowerUsage", convert=int)
    g.read("power_limit_mw", "nvmlDeviceGetEnforcedPowerLimit", convert=int)
    util = g.read("utilization", "nvmlDeviceGetUtilizationRates", store=False)
    if util is not None:
        g.data["utilization"] = {"gpu": int(util.gpu), "memory": int(util.memory)}
    procs = g.read("compute_processes", "nvmlDeviceGetComputeRunningProcesses", store=False)
    if procs is not None:
        g.data["compute_processes"] = len(procs)
        g.data["compute_pids"] = [int(getattr(p, "pid", 0)) for p in procs][:32]
    fabric = read_fabric(g)
    if fabric is not None:
        g.data["fabric"] = fabric
    return g.data


def read_fabric(g):
    """GPU fabric state (NVSwitch systems: is the fabric manager done with this GPU?)."""
    if g.lost:
        return None
    struct_v2 = getattr(pynvml, "c_nvmlGpuFabricInfo_v2_t", None)
    struct_v1 = getattr(pynvml, "c_nvmlGpuFabricInfo_t", None)
    attempts = []
    if struct_v2 is not None:
        attempts.append(("nvmlDeviceGetGpuFabricInfoV", struct_v2))
    if struct_v1 is not None:
        attempts.append(("nvmlDeviceGetGpuFabricInfo", struct_v1))
    for name, struct in attempts:
        info = struct()
        try:
            call(name, g.handle, pynvml.byref(info))
        except Failure as exc:
            if exc.info.get("code") == FUNCTION_NOT_FOUND:
                continue
            g.data["missing"]["fabric"] = {"reason": exc.info["reason"], "name": exc.info["name"],
                                           "detail": exc.info["message"]}
            return None
        return {"state": int(info.state), "status": int(info.status)}
    g.data["missing"]["fabric"] = {"reason": "unsupported", "name": "NVML_ERROR_FUNCTION_NOT_FOUND",
                                   "detail": "no GPU fabric query in this driver"}
    return None


def load_codes(given):
    """The code table from the parent's arguments; malformed entries are skipped."""
    table = given.get("codes") if isinstance(given, dict) else None
    if not isinstance(table, dict):
        return
    for key, entry in table.items():
        try:
            CODES[int(key)] = (str(entry[0]), str(entry[1]))
        except (TypeError, ValueError, IndexError):
            continue


def import_bindings(path):
    """pynvml, from ``path`` (the folder the parent found it in) when this interpreter runs
    without site (``-S``); should that fail, site is set up as usual and the import tried again."""
    if path and path not in sys.path:
        sys.path.append(path)
    try:
        import pynvml as module
    except ImportError:
        if not sys.flags.no_site:
            raise
        import site

        site.main()
        import pynvml as module
    return module


def main(given=None):
    """Read NVML; ``given`` is the parent's arguments (this script's own argv[1] when None)."""
    global pynvml
    given = args() if given is None else given
    load_codes(given)
    stage("import pynvml")
    try:
        module = import_bindings(given.get("path") if isinstance(given, dict) else None)
    except Exception as exc:
        done(bindings={"error": error_text(exc), "python": sys.executable})
        return
    pynvml = module
    emit(bindings={"module": getattr(module, "__file__", None), "python": sys.executable})

    try:
        call("nvmlInit")
        init = {"code": 0, "name": "NVML_SUCCESS", "reason": None, "message": ""}
    except Failure as exc:
        init = exc.info
    emit(init=init, library_path=mapped(r"(^|/)libnvidia-ml\.so"))
    if init["code"] != 0:
        done()
        return

    system = {"missing": {}}
    for key, names, convert in (
        ("driver_version", ["nvmlSystemGetDriverVersion"], text),
        # _v2 reports the CUDA version of the libcuda actually installed, which differs from the
        # driver's own when forward-compatibility libraries are in use.
        ("cuda_driver_version", ["nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"], int),
        ("device_count", ["nvmlDeviceGetCount"], int),
    ):
        try:
            system[key] = convert(first(names))
        except Failure as exc:
            system["missing"][key] = exc.info
    emit(system=system)

    emit(gpus=[])
    for index in range(system.get("device_count") or 0):
        append("gpus", read_gpu(index))
    cleanup("nvmlShutdown")
    try:
        call("nvmlShutdown")
    except Failure:
        pass
    done()


if __name__ == "__main__":
    main()
    exit_now()
