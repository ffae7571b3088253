"""toolkit-mismatch: does the CUDA toolkit (nvcc) match torch's CUDA for building extensions?"""

from __future__ import annotations

from typing import Any

from envdoctor.knowledge import catalogue, remedies, versions

from ..kit import Remediation, evidence, fail, ok, skip, warn
from ..model import Facts, Finding
from ..registry import check
from ._torch import _exe, _packages, torch_build

# ---------------------------------------------------------------------------------------------
# toolkit-mismatch

_BUILDS_EXTENSIONS = ("deepspeed", "flash-attn", "apex", "mmcv", "mmcv-full", "torch-scatter", "torch-sparse",
                      "torch-cluster", "pytorch3d", "detectron2")


@check("toolkit-mismatch", "The CUDA toolkit (nvcc) matches torch's CUDA for building extensions",
       needs=("toolkit.nvcc_version", "torch.cuda_version"))
def toolkit_mismatch(facts: Facts) -> Finding:
    ev = evidence(facts, "toolkit.nvcc_version", "torch.cuda_version", "env.vars", "toolkit.mismatch_error")
    if facts.get("toolkit.mismatch_error").ok:
        return _build_refused(facts, ev, str(facts.value("toolkit.mismatch_error")))
    # A builder's own refusal (DeepSpeed's op_builder) wrote the two versions it compared: judged as pasted.
    said = catalogue.judged_rows(facts.value("text.messages"), "toolkit-mismatch")
    if said and facts.get("toolkit.nvcc_version").ok and facts.get("torch.cuda_version").ok:
        ev["text.messages"] = [r["id"] for r in said][:10]
        return _build_refused(facts, ev, str(said[0]["line"]), str(said[0].get("emitter") or ""))
    build = torch_build(facts)
    nvcc = facts.value("toolkit.nvcc_version")
    if build is None or not build.cuda:
        return skip("Not a CUDA build of torch (or torch was not read)", evidence=ev)
    nv = versions.parse(nvcc)
    if nv is None:
        return skip("No CUDA toolkit (nvcc) found", detail="Only needed to build CUDA extensions; pip wheels bring "
                    "their own CUDA runtime.", evidence=ev)
    tv = versions.parse(build.cuda)
    assert tv is not None
    env = dict(facts.value("env.vars") or {})
    pkgs = _packages(facts)
    hints = [k for k in ("CUDA_HOME", "TORCH_CUDA_ARCH_LIST") if env.get(k)] + [p for p in _BUILDS_EXTENSIONS if p in pkgs]
    nvs = ".".join(map(str, nv.release[:2]))
    if nv.release[0] == tv.release[0]:
        return ok(f"nvcc {nvs} and torch's CUDA {build.cuda} share a major",
                  detail="Extensions build (torch.utils.cpp_extension only warns about a minor difference); running "
                         "torch does not use the toolkit.", evidence=ev)
    detail = (f"nvcc is CUDA {nvs}, torch {build.version} is built with CUDA {build.cuda}. Running torch does not use "
              "the toolkit (the wheel brings its runtime), but building a CUDA extension stops with \"The detected "
              f"CUDA version ({nvs}) mismatches the version that was used to compile PyTorch ({build.cuda})\".")
    remedy = _nvcc_remedy(facts, build.cuda)
    if hints:
        return warn(f"nvcc {nvs} ≠ torch's CUDA {build.cuda} while extensions are likely built",
                    detail=detail + f" Signals: {', '.join(hints)}.", evidence=ev, remedy=remedy)
    if not facts.get("env.vars").ok:  # CUDA_HOME / TORCH_CUDA_ARCH_LIST would say extensions are built
        detail += f" Whether extensions are built here is not known: the environment was not read ({facts.get('env.vars').describe()})."
    return ok(f"nvcc {nvs} ≠ torch's CUDA {build.cuda} (informational)", detail=detail, evidence=ev)


def _nvcc_remedy(facts: Facts, cuda: str) -> Remediation:
    """A CUDA toolkit (nvcc) of torch's CUDA for extension builds, from pip or conda."""
    major = cuda.split(".")[0]
    wheel = f"'nvidia-cuda-nvcc-cu{major}=={cuda}.*'" if int(major) <= 12 else f"'nvidia-cuda-nvcc=={cuda}.*'"
    return Remediation(f"When building extensions, point CUDA_HOME at a CUDA {major}.x toolkit (ideally {cuda}), "
                       "e.g. from pip or conda.",
                       (remedies.pip_install(_exe(facts), wheel), remedies.conda_install("nvidia", f"cuda-nvcc={cuda}")),
                       ("https://pytorch.org/docs/stable/cpp_extension.html",))


def _build_refused(facts: Facts, ev: dict[str, Any], line: str, emitter: str = "") -> Finding:
    """The extension build stopped (torch.utils.cpp_extension, or a builder on it such as DeepSpeed's op_builder):
    its nvcc is not of the CUDA torch was built with."""
    nvcc, cuda = facts.value("toolkit.nvcc_version"), facts.value("torch.cuda_version")
    who = f"{emitter} says {line!r}" if emitter else repr(line)
    # the line decides; a version it did not show is left out of the title, never printed as "None"
    title = (f"The extension build stopped: nvcc {nvcc} is not torch's CUDA {cuda}" if nvcc and cuda else
             "The extension build stopped: the CUDA toolkit (nvcc) is not of torch's CUDA"
             + (f" {cuda}" if cuda else ""))
    return fail(title,
                detail=f"{who}: torch.utils.cpp_extension compiles with the nvcc of "
                       "CUDA_HOME and refuses one of another CUDA than torch's. Running torch does not need the "
                       "toolkit; building extensions needs one that matches (or a torch built for the toolkit's "
                       "CUDA).", evidence=ev, remedy=_nvcc_remedy(facts, str(cuda)) if cuda else None)
