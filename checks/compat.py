"""Compatibility checks: do driver, GPU, torch wheel, its bundled libraries and companions fit together?

Each check judges facts (from a live probe or a parsed paste) against the table in
``envdoctor/data/compat.json`` through :mod:`envdoctor.knowledge.compat`. What the installed torch says about
itself (``torch.arch_list``) wins over the table. When the table decided, the finding's detail
carries its ``as_of`` date; a version the table does not know yields a note, never a ``fail``, and a
table row marked unverified can at most ``warn``.
"""

from __future__ import annotations

from .compat_arch import gpu_eol, torch_arch_support
from .compat_driver import driver_too_old
from .compat_libs import cudnn_mismatch, nccl_mismatch
from .compat_packages import cuda_major_mix, python_supported, torch_companions
from .compat_toolkit import toolkit_mismatch

#: Registration order, which is also the order of findings of the same severity: the driver first
#: (the root cause of most), then kernels for the GPU, libraries, the toolkit and the packages.
CHECKS = [driver_too_old, torch_arch_support, cudnn_mismatch, nccl_mismatch, toolkit_mismatch, torch_companions,
          cuda_major_mix, python_supported, gpu_eol]
