"""toolkit-mismatch: does the CUDA toolkit (nvcc) match torch's CUDA for building extensions?"""

from __future__ import annotations

from .. import remedies, versions
from ..kit import Remediation, evidence, ok, skip, warn
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
    ev = evidence(facts, "toolkit.nvcc_version", "torch.cuda_version", "env.vars")
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
    remedy = Remediation(f"When building extensions, point CUDA_HOME at a CUDA {build.cuda.split('.')[0]}.x toolkit "
                         f"(ideally {build.cuda}), e.g. from pip or conda.",
                         (remedies.pip_install(_exe(facts), f"'nvidia-cuda-nvcc-cu{build.cuda.split('.')[0]}=={build.cuda}.*'"
                                               if tv.release[0] <= 12 else f"'nvidia-cuda-nvcc=={build.cuda}.*'"),
                          f"conda install -c nvidia cuda-nvcc={build.cuda}"),
                         ("https://pytorch.org/docs/stable/cpp_extension.html",))
    if hints:
        return warn(f"nvcc {nvs} ≠ torch's CUDA {build.cuda} while extensions are likely built",
                    detail=detail + f" Signals: {', '.join(hints)}.", evidence=ev, remedy=remedy)
    return ok(f"nvcc {nvs} ≠ torch's CUDA {build.cuda} (informational)", detail=detail, evidence=ev)
