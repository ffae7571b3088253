"""Child: load CUDA runtime / cuDNN / NCCL copies with ctypes and report their versions (stdlib only).

Two modes, chosen by ``{"mode": ...}`` in argv[1]:

* ``site``: where the target interpreter keeps its packages (site-packages, prefix, torch's folder
  located without importing torch, torch's pinned ``nvidia-*`` requirements). Cheap: no loads.
* ``load``: given ``{"files": [{"path", "family"}], "skip": [task ids]}``, first ask the dynamic
  loader for each soname those files provide (``ctypes.CDLL("libcudart.so.12")``), then load each
  file by its path and call its version function.

Every load is a task announced with ``stage(task_id)`` and answered by one record keyed by the
same id, so when a library's constructor segfaults or hangs the parent knows which task killed
the child, keeps every record printed before it, and starts a fresh child with ``skip`` set.

Soname loads run before any path load in each child: glibc matches a bare-soname ``dlopen``
against the sonames of objects already loaded, so after a path load it would answer "the one you
already loaded" instead of "the one the search order finds".
"""

import os as _os
import sys as _sys

# The script's own folder holds _edchild and its siblings; PYTHONSAFEPATH=1 (or -P, -I) leaves it
# off sys.path, and the child must still start (never a "No module named '_edchild'").
_HERE = _os.path.dirname(_os.path.abspath(__file__))
if _HERE not in _sys.path[:1]:
    _sys.path.insert(0, _HERE)

import ctypes
import os
import re
import struct

from _edchild import args, done, emit, error_text, exit_now, mapped_files, stage

# Families this child knows a version function for. cuBLAS is left out on purpose: loading it
# maps libcublasLt too (hundreds of MB) only to learn what the file name already says.
LOADABLE = ("cudart", "cudnn", "nccl")

PLAIN_SONAME = re.compile(r"^lib[A-Za-z_]+\.so(\.\d+)*$")
_DT_NULL, _DT_STRTAB, _DT_SONAME = 0, 5, 14
_PT_LOAD, _PT_DYNAMIC = 1, 2
_RTLD_DI_LINKMAP = 2


def _program_headers(fh, head, is64, end):
    """(PT_LOAD segments as (vaddr, offset, filesz), the PT_DYNAMIC (offset, filesz) or None)."""
    if is64:
        (phoff,) = struct.unpack_from(end + "Q", head, 32)
        phentsize, phnum = struct.unpack_from(end + "HH", head, 54)
    else:
        (phoff,) = struct.unpack_from(end + "I", head, 28)
        phentsize, phnum = struct.unpack_from(end + "HH", head, 42)
    fh.seek(phoff)
    table = fh.read(phentsize * phnum)
    loads, dynamic = [], None
    for i in range(phnum):
        off = i * phentsize
        if is64:
            p_type, _f, p_offset, p_vaddr, _p, p_filesz = struct.unpack_from(end + "IIQQQQ", table, off)
        else:
            p_type, p_offset, p_vaddr, _p, p_filesz = struct.unpack_from(end + "IIIII", table, off)
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    return loads, dynamic


def _dynamic_soname(data, is64, end):
    """(DT_STRTAB's address, DT_SONAME's string offset) from the dynamic section, either None."""
    fmt, size = (end + "qQ", 16) if is64 else (end + "iI", 8)
    strtab = soname = None
    for off in range(0, len(data) - size + 1, size):
        tag, val = struct.unpack_from(fmt, data, off)
        if tag == _DT_NULL:
            break
        if tag == _DT_STRTAB:
            strtab = val
        elif tag == _DT_SONAME:
            soname = val
    return strtab, soname


def elf_soname(path):
    """DT_SONAME of an ELF shared object, read from the file (no load), or None."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if head[:4] != b"\x7fELF" or len(head) < 52:
                return None
            is64 = head[4] == 2
            end = "<" if head[5] == 1 else ">"
            loads, dynamic = _program_headers(fh, head, is64, end)
            if dynamic is None:
                return None
            fh.seek(dynamic[0])
            strtab, soname = _dynamic_soname(fh.read(dynamic[1]), is64, end)
            if strtab is None or soname is None:
                return None
            # DT_STRTAB holds a virtual address; translate it through the PT_LOAD segments.
            for vaddr, offset, filesz in loads:
                if vaddr <= strtab < vaddr + filesz:
                    fh.seek(strtab - vaddr + offset + soname)
                    raw = fh.read(256)
                    return raw.split(b"\0", 1)[0].decode("utf-8", "replace") or None
    except (OSError, struct.error, ValueError):
        return None
    return None


def soname_from_name(path):
    """libcudart.so.12.4.127 -> libcudart.so.12 (the convention NVIDIA's files follow)."""
    name = os.path.basename(path)
    head, sep, tail = name.partition(".so")
    if not sep:
        return None
    parts = [p for p in tail.split(".") if p]
    return head + ".so" + ("." + parts[0] if parts else "")


# cudart and NCCL write the version through an int* and return a status code; cuDNN returns it.
_VERSION_OUT_PARAM = {"cudart": "cudaRuntimeGetVersion", "nccl": "ncclGetVersion"}


def version_of(lib, family):
    """(integer version as the library's API returns it, error text)."""
    try:
        if family in _VERSION_OUT_PARAM:
            name = _VERSION_OUT_PARAM[family]
            value = ctypes.c_int(0)
            fn = getattr(lib, name)
            fn.restype = ctypes.c_int
            rc = fn(ctypes.byref(value))
            return (value.value, None) if rc == 0 else (None, "%s returned %d" % (name, rc))
        if family == "cudnn":
            fn = lib.cudnnGetVersion
            fn.restype = ctypes.c_size_t
            fn.argtypes = []
            return int(fn()), None
    except AttributeError as exc:
        return None, "no version function: %s" % exc
    return None, None


class _LinkMap(ctypes.Structure):
    _fields_ = [("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p)]


def _dlinfo():
    # dlinfo lives in libc since glibc 2.34 and in libdl before; musl has none.
    for name in (None, "libdl.so.2"):
        try:
            fn = ctypes.CDLL(name).dlinfo
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
            return fn
        except (OSError, AttributeError):
            continue
    return None


def _mapped_files():
    try:
        return set(mapped_files())
    except OSError:
        return set()


def loaded_path(lib, soname, before):
    """Where the loader found the object: its link-map name, else the file newly mapped."""
    dlinfo = _dlinfo()
    if dlinfo is not None:
        lm = ctypes.POINTER(_LinkMap)()
        if dlinfo(ctypes.c_void_p(lib._handle), _RTLD_DI_LINKMAP, ctypes.byref(lm)) == 0 and lm:
            name = lm.contents.l_name
            if name:
                return name.decode("utf-8", "replace")
    stem = soname.split(".so", 1)[0]
    for path in sorted(_mapped_files() - before):
        if os.path.basename(path).startswith(stem + ".so") or os.path.basename(path).startswith(stem + "-"):
            return path
    return None


def load_soname(soname, family):
    before = _mapped_files()
    try:
        lib = ctypes.CDLL(soname)
    except OSError as exc:
        return {"soname": soname, "family": family, "path": None, "error": error_text(exc)}
    path = loaded_path(lib, soname, before)
    version, err = version_of(lib, family)
    return {"soname": soname, "family": family, "path": path,
            "file": os.path.realpath(path) if path else None, "api_version": version, "version_error": err}


def load_file(path, family):
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        return {"path": path, "loaded": False, "error": error_text(exc)}
    version, err = version_of(lib, family)
    return {"path": path, "loaded": True, "api_version": version, "version_error": err}


def site_info():
    import site
    import sys

    dirs = []
    try:
        dirs.extend(site.getsitepackages())
    except Exception:
        pass
    try:
        user = site.getusersitepackages()
        if site.ENABLE_USER_SITE and os.path.isdir(user):
            dirs.append(user)
    except Exception:
        pass
    for entry in sys.path:
        if entry.rstrip("/").endswith(("site-packages", "dist-packages")):
            dirs.append(entry)
    seen, ordered = set(), []
    for d in dirs:
        if d and d not in seen and os.path.isdir(d):
            seen.add(d)
            ordered.append(d)
    info = {"executable": sys.executable, "prefix": sys.prefix, "site_packages": ordered,
            "conda": os.path.isdir(os.path.join(sys.prefix, "conda-meta"))}
    try:
        import importlib.util

        # find_spec on a top-level name locates the package without importing it.
        spec = importlib.util.find_spec("torch")
        locations = list(spec.submodule_search_locations or []) if spec else []
        info["torch_path"] = locations[0] if locations else None
    except Exception as exc:
        info["torch_path"] = None
        info["torch_error"] = error_text(exc)
    if info.get("torch_path"):
        try:
            from importlib import metadata

            dist = metadata.distribution("torch")
            info["torch_version"] = dist.version
            info["torch_requires"] = list(dist.requires or [])
        except Exception as exc:
            info["torch_requires_error"] = error_text(exc)
    return info


def main():
    opts = args()
    if opts.get("mode") == "site":
        stage("site")
        done(site=site_info())
        return
    files = [f for f in opts.get("files", []) if f.get("family") in LOADABLE]
    skip = set(opts.get("skip", []))
    stage("elf")
    sonames = {}
    for f in files:
        sonames[f["path"]] = elf_soname(f["path"]) or soname_from_name(f["path"])
    emit(elf=sonames)
    tasks = []
    for f in files:
        soname = sonames.get(f["path"])
        # auditwheel's hashed copies (libcudart-a7b20f20.so.11.0) are reached by their own
        # DT_NEEDED name only; nobody dlopens them by soname.
        task = "so:" + soname if soname and PLAIN_SONAME.match(soname) else None
        if task and task not in skip and task not in [t[0] for t in tasks]:
            tasks.append((task, "soname", soname, f["family"]))
    for f in files:
        task = "file:" + f["path"]
        if task not in skip:
            tasks.append((task, "file", f["path"], f["family"]))
    for task, kind, target, family in tasks:
        stage(task)
        try:
            record = load_soname(target, family) if kind == "soname" else load_file(target, family)
        except Exception as exc:  # a ctypes surprise must not lose the other results
            record = {"error": error_text(exc)}
        emit(**{task: record})
    done()


if __name__ == "__main__":
    main()
    exit_now()
