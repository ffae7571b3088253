"""The one home for which environment variables' *values* a report may show.

envdoctor reports the names of the variables that change CUDA/torch behaviour (``redact.is_reported``),
but a value is shown only when its name is on this exact list: the variables a probe or a check
reads and judges, each of which holds a switch, a count, a device list or a path, never a
credential. Every other value (``TF_VAR_db_pass``, ``HF_API``, ``NCCL_IB_SECRET``…) is replaced by
``<redacted>``: a list of secret-looking names or shapes always misses some, an exact list of the
names envdoctor judges does not. A shown value still passes through the credential patterns of
:mod:`envdoctor.redact` (a URL's user part or password in ``PATH`` is masked).

A name is added here when a check starts reading it (tests/test_envvars.py holds that every name
the checks and probes read is listed).
"""

from __future__ import annotations

from envdoctor.knowledge.launch import IFNAME_VARS, NCCL_SWITCHES, PER_RANK_VARS, SLURM_VARS, TORCHRUN_VARS

#: Read by the probes and checks outside the launch tables: device selection and visibility
#: (nvidia probe, driver and launch checks), the debugging switches and loader paths of the
#: `env-vars` and library checks, the toolkit and extension-build hints of compat_toolkit, the
#: interpreter/environment a report describes, and thread counts of the container check.
_JUDGED = (
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "CUDA_LAUNCH_BLOCKING", "LD_PRELOAD", "LD_LIBRARY_PATH", "PATH", "PYTHONPATH", "CUDA_HOME", "CUDA_PATH",
    "TORCH_CUDA_ARCH_LIST", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "OMP_NUM_THREADS",
    "MKL_NUM_THREADS", "container", "WSL_DISTRO_NAME", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE",
)

#: The exact names whose values are shown.
SHOWN: frozenset[str] = frozenset(_JUDGED) | frozenset(TORCHRUN_VARS) | frozenset(SLURM_VARS) | PER_RANK_VARS \
    | frozenset(IFNAME_VARS) | frozenset(sw.name for sw in NCCL_SWITCHES)
