"""Child: ask the CUDA driver API itself (ctypes on ``libcuda.so.1``, stdlib only).

``cuInit`` is the call every CUDA program makes first; its result, named and worded by the
driver (``cuGetErrorName``/``cuGetErrorString``), is the most direct answer to "can CUDA run
here". ``cuDriverGetVersion`` works even when ``cuInit`` fails. The mapped ``libcuda`` file is
read from ``/proc/self/maps``: a copy under ``…/compat/`` is a forward-compatibility library.
"""

import os as _os
import sys as _sys

# The script's own folder holds _edchild and its siblings; PYTHONSAFEPATH=1 (or -P, -I) leaves it
# off sys.path, and the child must still start (never a "No module named '_edchild'").
_HERE = _os.path.dirname(_os.path.abspath(__file__))
if _HERE not in _sys.path[:1]:
    _sys.path.insert(0, _HERE)

import ctypes

from _edchild import done, emit, error_text, exit_now, mapped, stage


def error_info(lib, code):
    """``{"code", "name", "message"}`` in the driver's own words (None when it has none)."""
    info = {"code": code, "name": None, "message": None}
    for key, fn_name in (("name", "cuGetErrorName"), ("message", "cuGetErrorString")):
        fn = getattr(lib, fn_name, None)
        if fn is None:
            continue
        out = ctypes.c_char_p()
        fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        fn.restype = ctypes.c_int
        try:
            if fn(code, ctypes.byref(out)) == 0 and out.value:
                info[key] = out.value.decode("utf-8", "replace")
        except Exception:
            pass
    return info


def main(given=None):
    """Ask libcuda; ``given`` (the parent's arguments) holds nothing this probe needs."""
    stage("dlopen libcuda.so.1")
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        done(load_error=error_text(exc).replace("OSError: ", ""))
        return
    emit(library_path=mapped(r"(^|/)libcuda\.so"))

    stage("cuDriverGetVersion")
    version = ctypes.c_int(0)
    try:
        rc = lib.cuDriverGetVersion(ctypes.byref(version))
        emit(driver_version=version.value if rc == 0 else None,
             driver_version_error=None if rc == 0 else error_info(lib, rc))
    except AttributeError as exc:
        emit(driver_version=None, driver_version_error={"code": None, "name": "missing symbol",
                                                        "message": error_text(exc)})

    stage("cuInit")
    rc = lib.cuInit(ctypes.c_uint(0))
    emit(init=error_info(lib, rc))
    if rc != 0:
        done()
        return

    stage("cuDeviceGetCount")
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc == 0:
        done(device_count=count.value)
    else:
        done(device_count=None, device_count_error=error_info(lib, rc))


if __name__ == "__main__":
    main()
    exit_now()
