"""The fact keys: every key a probe or a parser writes, once each, with its producers, its value's
type and a one-line doc. The one home of the Facts contract.

Probes (``ProbeSpec.keys``), parsers (their ``KEYS``) and checks (``@check(needs=...)``) are
validated against :data:`FACT_KEYS` when they are defined, so a typo is an error naming the key,
not a fact that silently reads as ``not_collected``. ``docs/FACTS.md``'s tables are generated
from it (``python -m envdoctor.knowledge.factkeys docs/FACTS.md``; ``--check`` only compares).

Every key is literal: the families that look dynamic (``libs.<family>_copies``,
``micro.<check>``) are closed sets, listed one by one.

A producer is ``probe:<ProbeSpec.name>``, ``parser:<module>`` (``parser:parse_text`` is
``envdoctor/parsers/__init__.py`` itself: the container evidence and Python's banner), or
``command:distributed`` (rank 0 of ``check --distributed``, ``envdoctor/pipeline/cluster.py`` ``KEYS``), or
``command:healthcheck``/``command:exec`` (``plan.*``: what the user asked the checks to hold the machine
to, written from the Plan by ``envdoctor/pipeline/collect.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

from envdoctor.record import Record

#: The closed vocabulary of value types (of a reading read fine; ``|null`` = the value may be null).
FactType = Literal["str", "int", "float", "bool", "list", "object",
                   "str|null", "int|null", "float|null", "bool|null", "list|null", "object|null"]
TYPES: frozenset[str] = frozenset(get_args(FactType))


class FactKey(Record):
    key: str
    type: FactType
    producers: tuple[str, ...]
    doc: str

    @property
    def probes(self) -> tuple[str, ...]:
        return tuple(p.split(":", 1)[1] for p in self.producers if p.startswith("probe:"))

    @property
    def parsers(self) -> tuple[str, ...]:
        return tuple(p.split(":", 1)[1] for p in self.producers if p.startswith("parser:"))


def _k(key: str, type: FactType, producers: tuple[str, ...], doc: str) -> FactKey:
    return FactKey(key, type, producers, doc)


# Docs that disagreed with the code (the code won): torch.cuda_init_error was written by the
# python probe but undocumented; nvml.init is written by the nvidia-smi parser although it is
# not in nvidia_smi.KEYS; host.container / host.container_evidence / container.gpus_requested
# are written for pastes by parsers/__init__.py.
_ENTRIES: tuple[FactKey, ...] = (
    # Evidence read from pasted text by envdoctor/parsers/evidence.py (judged by checks/evidence.py).
    _k('torch.shm_errors', 'list', ('parser:evidence',),
       'DataLoader shared-memory failures as printed ("Unexpected bus error encountered in worker … (shm)", '
       '"unable to write to file </torch_…>")'),
    _k('text.messages', 'list', ('parser:collect_env',),
       'pastes only: the message-catalogue rows (`envdoctor/data/messages.json`, and the code strings of '
       'errors.json) the text holds: `[{"id", "cause", "severity", "judged_by", "remedy", "emitter", "verified", '
       '"role" (`cause`\\|`symptom`), "line", "args"}]`, the line redacted; a row\'s `writes` also write the facts '
       'its arguments carry (`torch.version` from xFormers\' "(you have …)")'),
    _k('text.tools', 'list', ('parser:toollines',),
       'pastes only: the start-up lines of known tools the text holds (llama.cpp/ggml `ggml_cuda_init`, Ollama\'s '
       '`msg="inference compute"`, TensorFlow\'s `Created device … compute capability`, ComfyUI\'s `Total VRAM`, '
       'A1111\'s footer, vLLM\'s engine line, `conda info`, `kubectl describe node`, `pip show`, `lspci`, a '
       '`docker|podman run`): `[{"tool", "line"}]`, redacted'),
    _k('text.frameworks', 'object', ('parser:statements', 'parser:toollines', 'parser:prose'),
       'pastes only: versions of frameworks other than torch the text states (issue forms, '
       '`jax.print_environment_info()`, A1111\'s footer, vLLM\'s engine line): `{"tensorflow": "2.15.0", '
       '"jax": "0.4.23", "xformers": "0.0.23.post1"}`'),
    _k('text.env_assignments', 'object', ('parser:toollines',),
       'pastes only: the GPU stack\'s variables a command line in the text sets (`CUDA_VISIBLE_DEVICES=1 python '
       '…`, `export NCCL_P2P_DISABLE=1`, `docker run -e …`), name → value (redacted). Only what the text shows: '
       'a variable it does not show is unknown, not unset, so this is never `env.vars`'),
    _k('text.node_gpus', 'object', ('parser:toollines',),
       'pastes only: `kubectl describe node`\'s `nvidia.com/gpu` in its blocks: `{"capacity": 4, '
       '"allocatable": 0}` (a block the text does not show is absent)'),
    _k('text.wsl_distros', 'list', ('parser:toollines',),
       'pastes only: `wsl -l -v`\'s rows: `[{"name", "state", "version" (1\\|2), "default" (marked `*`)}]`'),
    _k('text.tensorflow_gpus', 'int', ('parser:toollines',),
       'pastes only: how many GPUs TensorFlow\'s `tf.config.list_physical_devices(\'GPU\')` returned in the text '
       '(`[]` is 0), or its GPU guide\'s `Num GPUs Available: N`'),
    _k('text.pip_missing_extras', 'list', ('parser:toollines',),
       'pastes only: pip\'s "X V does not provide the extra \'E\'": `[{"package", "version", "extra"}]` '
       '(`tensorflow[and-cuda]` on Windows)'),
    _k('text.compose_gpus', 'bool', ('parser:toollines',),
       'pastes only: whether the Compose file\'s `services:` block the text shows asks for GPUs '
       '(`deploy.resources.reservations.devices` with `driver: nvidia` / `capabilities: [gpu]`, `gpus:`, '
       '`runtime: nvidia`, `NVIDIA_VISIBLE_DEVICES`); absent when the text shows no Compose file'),
    _k('text.hang', 'str', ('parser:prose',),
       'pastes only: the sentence of a person\'s that says the program hangs (stops making progress: "hangs", '
       '"stuck", "freezes", "deadlock"), not a hypothesis ("if it hangs"); absent when the text says none'),
    _k('text.error_lines', 'list', ('parser:collect_env',),
       'pastes only: the lines reporting an error (an exception line, `error:`, `failed`, `cannot`, `NCCL WARN`, '
       'a fatal signal, a non-zero exit) that no signature or catalogue row explains, worst first: '
       '`[{"line", "package" (of the traceback\'s last frame, or null), "rank" (0 fatal, 1 exception, 2 error '
       'word, 3 failed/cannot)}]`; absent when there is none'),
    _k('nccl.socket_errors', 'list', ('parser:evidence',),
       'NCCL bootstrap lines saying it found no usable socket interface ("Bootstrap : no socket interface found")'),
    _k('nccl.socket_ifname', 'str', ('parser:evidence',),
       'NCCL_SOCKET_IFNAME as the text shows it (`"eth0"`, `"=enp90s0np0"`, `"^lo,docker"`)'),
    _k('driver.fabricmanager_service', 'str', ('parser:evidence',),
       'the nvidia-fabricmanager systemd unit as shown: `"active"`, `"inactive"`, `"failed"`, `"not-found"`, '
       '`"masked"`'),
    _k('driver.fabricmanager_mismatch', 'object', ('parser:evidence',),
       "the fabric manager's own refusal to start, as its log shows it: `{\"fabricmanager\": \"530.30.02\", "
       '"driver": "530.41.03"}` from "fabric manager NVIDIA GPU driver interface version X don\'t match with driver '
       'version Y"'),
    _k('driver.nvswitch_present', 'bool', ('parser:evidence',),
       'False when the fabric manager\'s log says it found no NVSwitch to manage ("request to query NVSwitch device '
       'information from NVSwitch driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]")'),
    _k('nccl.wheel_versions', 'object', ('parser:evidence',),
       'every version a text lists for each NCCL wheel (`pip freeze` / `pip list` / collect_env\'s `[pip3]` rows, '
       'several nodes\' listings pasted together): `{"nvidia-nccl-cu12": ["2.19.3", "2.20.5"]}`'),
    _k('pci.acs_enabled', 'int', ('parser:evidence',),
       'how many distinct `lspci -vvv` ACSCtl lines shown have SrcValid+ (ACS on: P2P goes through the IOMMU)'),
    _k('pci.nvidia_devices', 'list', ('parser:evidence',),
       'pastes only: NVIDIA display / 3D controllers an `lspci -nn` line or the kernel\'s PCI scan (dmesg '
       '`pci 0000:01:00.0: [10de:1b06] … class 0x0300…`) shows, `[{"address": "01:00.0", "device": "1b06", '
       '"name": "GP102 [GeForce GTX 1080 Ti]"\\|null}]`; the GPU catalogue names each by its id'),
    _k('launch.nproc_per_node', 'int', ('parser:evidence',),
       '`--nproc_per_node` of a torchrun / torch.distributed.launch line'),
    _k('launch.visible_devices', 'list', ('parser:evidence',),
       'the CUDA_VISIBLE_DEVICES prefix of that launch line, as a list of strings'),
    _k('launch.command', 'str', ('parser:evidence',),
       'the launch line itself (first 200 characters)'),
    _k('cuda.invalid_device_ordinal', 'str', ('parser:evidence',),
       'CUDA\'s "invalid device ordinal" line as printed'),
    _k('toolkit.build_errors', 'list', ('parser:evidence',),
       'extension-build lines saying no CUDA toolkit was found ("CUDA_HOME environment variable is not set", '
       '"nvcc: not found")'),
    _k('toolkit.mismatch_error', 'str', ('parser:evidence',),
       'torch.utils.cpp_extension refusing a build: "The detected CUDA version (12.1) mismatches the version that '
       'was used to compile PyTorch (11.8)" as printed; its two versions become toolkit.nvcc_version / '
       'torch.cuda_version where nothing else gave them'),
    _k('libs.missing_dlls', 'list', ('parser:evidence',),
       'DLLs Windows could not load, a name or the path torch printed ("cudnn_ops_infer64_8.dll")'),
    _k('host.os', 'str', ('probe:host', 'parser:collect_env', 'parser:parse_text', 'parser:statements', 'parser:evidence'),
       '`"Linux"` / `"Windows"` / `"Darwin"`'),
    _k('host.distro', 'str|null', ('probe:host', 'parser:collect_env', 'parser:statements'),
       '`"Debian GNU/Linux 12 (bookworm)"` (PRETTY_NAME)'),
    _k('host.kernel', 'str', ('probe:host', 'parser:collect_env', 'parser:evidence'),
       '`"6.8.0-45-generic"`'),
    _k('host.arch', 'str', ('probe:host', 'parser:collect_env', 'parser:statements'),
       '`"x86_64"`'),
    _k('host.glibc', 'str', ('probe:host', 'parser:collect_env'),
       '`"2.36"`'),
    _k('host.cpu_count', 'int', ('probe:host',),
       'logical CPUs (int)'),
    _k('host.cgroup_cpu_limit', 'float|null', ('probe:host',),
       'CPUs allowed by the cgroup (float) or null when unlimited'),
    _k('host.cgroup_memory_limit', 'int|null', ('probe:host',),
       'bytes or null when unlimited'),
    _k('host.memory_total', 'int', ('probe:host',),
       'bytes'),
    _k('host.container', 'str|null', ('probe:host', 'parser:parse_text'),
       '`"docker"`, `"podman"`, `"kubernetes"`, `"containerd"`, `"lxc"` or the `container=` variable\'s value; '
       'null when not in a container'),
    _k('host.container_evidence', 'list', ('probe:host', 'parser:parse_text'),
       'list of strings (`"/.dockerenv exists"`, …)'),
    _k('host.wsl', 'bool', ('probe:host', 'parser:collect_env', 'parser:statements', 'parser:evidence'),
       'bool'),
    _k('host.shm_size', 'int', ('probe:host', 'parser:evidence'),
       'bytes of `/dev/shm`'),
    _k('host.is_root', 'bool', ('probe:host',),
       'bool'),
    _k('host.shared_mounts', 'list', ('probe:host',),
       'mounts of host or network filesystems (ext4, xfs, nfs, …; not `/`, not the `/etc/hosts`-like files '
       'runtimes bind in) from `/proc/self/mountinfo`: `[{"mountpoint", "fstype", "writable"}]` (at most 256)'),
    _k('env.vars', 'object', ('probe:host', 'parser:collect_env'),
       'object name → value, allow-listed and redacted (`"<redacted>"`)'),
    _k('python.executable', 'str', ('probe:python',),
       'path'),
    _k('python.target', 'object', ('probe:python',),
       'the interpreter examined and why it was chosen: `{"path": …, "chosen_by": "--python" | "VIRTUAL_ENV" | '
       '"CONDA_PREFIX" | ".venv in DIR" | "python3 on PATH" | "envdoctor\'s own interpreter: …"}`'),
    _k('python.version', 'str', ('probe:python', 'parser:collect_env', 'parser:ultralytics', 'parser:parse_text', 'parser:statements', 'parser:toollines', 'parser:prose'),
       '`"3.11.7"`'),
    _k('python.implementation', 'str', ('probe:python',),
       '`"CPython"`'),
    _k('python.externally_managed', 'bool', ('probe:python',),
       'PEP 668: true when the target interpreter is a distribution\'s (an `EXTERNALLY-MANAGED` file in its '
       'stdlib folder, not a venv), where `pip install` is refused with "externally-managed-environment"'),
    _k('python.packages', 'object', ('probe:python', 'parser:collect_env', 'parser:packages'),
       'object dist name (normalised, lower-case, `-`) → version, relevant ones only'),
    _k('torch.version', 'str', ('probe:python', 'parser:collect_env', 'parser:ultralytics', 'parser:packages', 'parser:statements', 'parser:toollines', 'parser:prose'),
       '`"2.6.0+cu126"`; reason `absent` when torch is not installed, `failed` when its import raised '
       '(detail = the error text)'),
    _k('torch.import_error', 'str|null', ('probe:python',),
       'the text `import torch` raised, null when it imported (reason `skipped` when torch is absent). '
       'Reports written before this key carry the text as torch.version\'s detail; checks read either '
       'through `envdoctor.views.torch_import_error`'),
    _k('torch.cudnn_error', 'str|null', ('probe:python',),
       'the text reading the loaded cuDNN\'s version raised (torch\'s "cuDNN version incompatibility …"), null'
       ' when it read fine; older reports: torch.cudnn_version\'s detail (`envdoctor.views.cudnn_error`)'),
    _k('torch.import_noise_bytes', 'int', ('probe:python',),
       'bytes the torch child printed on stdout besides its records (what `import torch` and whatever it loads '
       'printed); over 1 MiB `torch-import` warns of a flood'),
    _k('torch.path', 'str', ('probe:python',),
       'torch package folder'),
    _k('torch.cuda_version', 'str|null', ('probe:python', 'parser:collect_env', 'parser:ultralytics', 'parser:packages', 'parser:statements', 'parser:evidence', 'parser:toollines', 'parser:prose'),
       '`"12.6"` or null for a CPU build (`torch.version.cuda`)'),
    _k('torch.hip_version', 'str|null', ('probe:python', 'parser:collect_env'),
       'string or null'),
    _k('torch.debug', 'bool', ('probe:python', 'parser:collect_env'),
       'bool'),
    _k('torch.cuda_available', 'bool', ('probe:python', 'parser:collect_env', 'parser:ultralytics', 'parser:statements', 'parser:toollines'),
       'bool'),
    _k('torch.cuda_available_messages', 'list', ('probe:python', 'parser:collect_env'),
       'list of warning/error texts torch emitted while answering'),
    _k('torch.cuda_init_error', 'str|null', ('probe:python',),
       'the error text of torch\'s first CUDA use (`torch.zeros(1, device="cuda")`) when it raised, else null'),
    _k('torch.device_count', 'int', ('probe:python', 'parser:collect_env', 'parser:ultralytics', 'parser:statements'),
       'int'),
    _k('torch.arch_list', 'list', ('probe:python', 'parser:collect_env'),
       '`["sm_50", …, "sm_90"]` (`torch.cuda.get_arch_list()`, may include `compute_90`)'),
    _k('torch.cudnn_version', 'int|null', ('probe:python', 'parser:collect_env', 'parser:statements'),
       'int as torch reports it (`90100`) or null; reason `failed` with torch\'s error text (e.g. "cuDNN '
       'version incompatibility: PyTorch was compiled against (8, 3, 2) but found runtime version (8, 0, '
       '3)"). From a paste: read from that message when it was pasted'),
    _k('torch.library_errors', 'list', ('parser:collect_env',),
       'pastes only: lines holding a dynamic-loader error ("…/libcusparse.so.12: undefined symbol: '
       '__nvJitLinkComplete_12_4, version libnvJitLink.so.12", "libcudart.so.12: cannot open shared object '
       'file"). Live, the same errors arrive in torch.import_error; checks read both through '
       '`checks/_common.library_errors`'),
    _k('torch.loader_failures', 'list', ('probe:python', 'parser:collect_env'),
       'every dynamic-loader failure torch or a program met, parsed by the loader grammar '
       '(`envdoctor.knowledge.messages.loader_errors`): `[{"kind": "missing-library"|"undefined-symbol"|"version-not-found"|'
       '"wrong-elf-class"|"wrong-architecture", "path", "library", "family" (cuda_libraries: `cudart`, `cuda` = '
       'the driver\'s libcuda, `nvml`, `cudnn`, …), "role" (`driver`|`toolkit`|`torch`), "symbol", "version_node", '
       '"provider", "requester" (glibc\'s "<program>: error while loading shared libraries"), "needed_by" '
       '(`torch`|`extension`|`application`|`python`|`framework` (a framework\'s own loader said it: '
       '"package" names it)|null), "package", "cuda_major", "stage" (`link`: GNU ld at build time, else absent)}]`. Live: from '
       'torch.import_error, torch.cuda_init_error and torch\'s CUDA messages; pasted: from the loader lines'),
    _k('torch.companion_cuda', 'object', ('parser:collect_env',),
       'pastes only: `{"torchvision": "11.8"}`, the CUDA a domain library was built for, from torchvision\'s '
       '/ torchaudio\'s own refusal ("PyTorch has CUDA Version=11.7 and torchvision has CUDA Version=11.8"). '
       "Live, the companions' local version tags (`+cu121`) in python.packages say the same"),
    _k('torch.cudnn_build_version', 'str|null', ('probe:python', 'parser:collect_env'),
       '`"9.1.0"`: the cuDNN torch was compiled against (`torch._C._cudnn.getCompileVersion()`), null for a '
       'build without cuDNN'),
    _k('torch.nccl_version', 'str|null', ('probe:python', 'parser:collect_env', 'parser:statements'),
       '`"2.21.5"` or null'),
    _k('torch.devices', 'list', ('probe:python', 'parser:collect_env', 'parser:ultralytics', 'parser:statements'),
       'list of `{"index", "name", "capability": [maj, min], "total_memory"}`'),
    _k('torch.loaded_libraries', 'object', ('probe:python',),
       '(issue 3) family → list of mapped file paths from `/proc/self/maps`'),
    _k('driver.kernel_module_version', 'str', ('probe:driver', 'parser:collect_env', 'parser:evidence'),
       '`"570.124.06"` from `/proc/driver/nvidia/version` (proprietary or open module text), else '
       '`/sys/module/nvidia/version`; reason `absent` when neither exists (module not loaded), `denied` when'
       ' unreadable'),
    _k('driver.modules', 'object', ('probe:driver', 'parser:evidence'),
       '`{"nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem", "nouveau"}` → bool, from'
       ' `/proc/modules` plus `/sys/module/<name>` (built-ins); reason `absent` when neither can be read'),
    _k('driver.packages', 'list', ('parser:evidence',),
       'pastes only: NVIDIA driver packages a `dpkg -l` / `rpm -qa` / `yum list` / `apt list` listing shows, '
       '`[{"name", "version", "driver": "575.64.03", "state": "ii"\\|"rc"\\|"installed"\\|…, "manager": '
       '"dpkg"\\|"rpm"\\|"yum"\\|"apt", "kind": "userspace"\\|"kernel"}]` (only packages whose version is a '
       'driver release)'),
    _k('driver.device_nodes', 'object', ('probe:driver',),
       'object path → `"ok"` (openable read-write by this user) / `"denied"` / `"absent"`: always '
       '`/dev/nvidiactl` and `/dev/nvidia-uvm`, plus every `/dev/nvidia*` present'),
    _k('driver.pci_gpus', 'list', ('probe:driver',),
       'list of `{"address", "vendor", "device", "class", "driver"}` for vendor 0x10de and class 0x03xxxx '
       "(display controllers only: the GPU's HDMI audio, USB-C and NVSwitch functions are left out); "
       '`driver` = the bound kernel driver (`"nvidia"`, `"nouveau"`, `"vfio-pci"`) or null; `[]` = the bus '
       'was read and holds no NVIDIA GPU; reason `absent` when `/sys/bus/pci/devices` does not exist'),
    _k('driver.pci_scanned', 'int', ('probe:driver',),
       'int: how many PCI devices were examined (what makes "no NVIDIA GPU" certain)'),
    _k('driver.xid_events', 'list', ('probe:kernel-log', 'parser:evidence'),
       'list of `{"pci", "code": int, "text", "line"}` from `dmesg` (kernel ring buffer, last 50); reason '
       '`denied` under `kernel.dmesg_restrict`, `absent` without dmesg, `timeout`'),
    _k('nvml.init', 'object', ('probe:nvml', 'parser:nvidia_smi'),
       '`{"code": int, "name": "NVML_ERROR_…"\\|"NVML_SUCCESS", "reason": '
       'null\\|"absent"\\|"denied"\\|"unsupported"\\|"failed", "message": str}`; `message` is NVML\'s own '
       '`nvmlErrorString` text (what nvidia-smi prints after "Failed to initialize NVML: "). Reason '
       '`timeout`/`crashed` when the child hung/died in nvmlInit (detail names the stage); `absent` when '
       'pynvml cannot be imported. After a successful init, `"shutdown": {"status": "timeout"\\|"crashed", '
       '"call": "nvmlShutdown", "detail": str}` is present only when the cleanup call hung or died after '
       'everything was read'),
    _k('nvml.library_path', 'str', ('probe:nvml',),
       'the `libnvidia-ml` file the child actually mapped (`/proc/self/maps`), e.g. '
       '`…/libnvidia-ml.so.570.124.06`; reason `absent` when it could not be loaded'),
    _k('nvml.driver_version', 'str', ('probe:nvml', 'parser:collect_env', 'parser:nvidia_smi', 'parser:statements', 'parser:prose'),
       '`"570.124.06"`; when nvmlInit failed: the init error\'s reason, detail `nvmlInit failed: NAME '
       '(message)`'),
    _k('nvml.smi_not_found', 'str', ('parser:nvidia_smi',),
       'the line a shell printed when it could not find nvidia-smi (bash\'s "nvidia-smi: command not found", '
       'dash\'s "nvidia-smi: not found", cmd.exe\'s "\'nvidia-smi\' is not recognized …"); written only when the '
       'text shows one'),
    _k('nvml.cuda_driver_version', 'int|null', ('probe:nvml', 'parser:nvidia_smi'),
       'int, e.g. `12080` (`nvmlSystemGetCudaDriverVersion_v2`, falling back to the unversioned call)'),
    _k('nvml.device_count', 'int', ('probe:nvml', 'parser:collect_env', 'parser:nvidia_smi', 'parser:statements', 'parser:toollines', 'parser:prose'),
       'int'),
    _k('nvml.gpus', 'list', ('probe:nvml', 'parser:collect_env', 'parser:nvidia_smi', 'parser:statements', 'parser:toollines', 'parser:prose'),
       'list of per-GPU objects (below)'),
    _k('driver.userspace_version', 'str', ('parser:collect_env',),
       'pastes only: the driver client (userspace) version from the kernel\'s "NVRM: API mismatch: the client'
       ' has the version X, but this kernel module has the version Y"'),
    _k('container.gpus_requested', 'bool', ('parser:collect_env', 'parser:parse_text'),
       'pastes only: whether the `docker\\|podman run` command the paste shows asked for GPUs (`--gpus`, '
       '`--runtime=nvidia`, `nvidia-docker`, CDI `nvidia.com/gpu`, `NVIDIA_VISIBLE_DEVICES`)'),
    _k('container.no_gpu_driver', 'str', ('parser:evidence',),
       'pastes only: the Docker daemon refusing a GPU request ("could not select device driver \\"\\" with '
       'capabilities: [[gpu]]"): no NVIDIA runtime is registered with that Docker'),
    _k('host.windows_build', 'int', ('parser:evidence',),
       'pastes only: the Windows build number of `ver`\'s "Microsoft Windows [Version 10.0.17763.292]" (17763), '
       'or of a "Windows build number:" field'),
    _k('launch.slurm_gpus_per_task', 'str', ('parser:evidence',),
       'pastes only: the batch-script directive or srun/sbatch line that sets Slurm\'s --gpus-per-task (each task then '
       'sees only its own GPUs)'),
    _k('text.wsl_named', 'str', ('parser:evidence',),
       'pastes only: the first line that names WSL ("WSL", "WSL2", "Windows Subsystem for Linux")'),
    _k('container.runtime_library_error', 'str', ('parser:evidence',),
       'pastes only: the NVIDIA container runtime hook (on the host) failing to load a driver library '
       '("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared '
       'object file"), from the line on'),
    _k('container.driver_requirement', 'str', ('parser:collect_env',),
       'pastes only: the driver an NGC image requires ("This container was built for NVIDIA Driver Release '
       '535.86 or later, but version 510.47.03 was detected")'),
    _k('container.cuda_requirement', 'str', ('parser:collect_env',),
       'pastes only: the CUDA a container image requires, from the NVIDIA container runtime refusing to '
       'start it ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4"; '
       'nvidia-docker 1.0\'s "unsupported CUDA version: 7.5 < 6.5")'),
    _k('cuda.init', 'object', ('probe:cuda-driver', 'parser:collect_env'),
       '`{"code": int, "name": "CUDA_ERROR_…", "message": str}` from `cuInit(0)`, worded by '
       '`cuGetErrorName`/`cuGetErrorString`; reason `absent` when `libcuda.so.1` cannot be loaded (detail = '
       "the dlerror), `timeout`/`crashed` when cuInit hung/died. From a paste: the code of torch's "
       '"Unexpected error from cudaGetDeviceCount() … Error 802: …" / "cuda runtime error (999)" message, '
       'for the runtime codes that equal a cuInit result (`envdoctor/knowledge/messages.py`)'),
    _k('cuda.driver_version', 'int', ('probe:cuda-driver', 'parser:collect_env', 'parser:toollines'),
       'int from `cuDriverGetVersion` (answers even when cuInit fails)'),
    _k('cuda.device_count', 'int', ('probe:cuda-driver',),
       'int from `cuDeviceGetCount`; reason `failed` when cuInit failed'),
    _k('cuda.library_path', 'str', ('probe:cuda-driver',),
       'the `libcuda` file mapped; a path containing `/compat/` is a forward-compatibility copy'),
    _k('visibility.cuda_visible_devices', 'object', ('probe:visibility',),
       '`{"raw", "set", "kind": "unset"\\|"empty"\\|"index"\\|"uuid"\\|"mig", "entries", "ignored", '
       '"stopped_at", "stop_reason": null\\|"invalid"\\|"negative"\\|"duplicate", "hides_all", "loose_tokens"}`'
       " parsed with CUDA's rules as torch mirrors them (`torch.cuda._parse_visible_devices`): strtoul-style"
       ' integers (`"1gpu"` is 1), a negative/invalid token ends the list, a repeated device hides all, '
       '`GPU-`/`MIG-` lists end at the first token without the prefix'),
    _k('visibility.cuda_device_order', 'str|null', ('probe:visibility',),
       'the raw `CUDA_DEVICE_ORDER` or null (CUDA then orders FASTEST_FIRST)'),
    _k('visibility.nvidia_visible_devices', 'object', ('probe:visibility',),
       '`{"raw", "mode": "unset"\\|"all"\\|"none"\\|"void"\\|"list", "devices"}`'),
    _k('visibility.nvidia_driver_capabilities', 'object', ('probe:visibility',),
       '`{"raw", "capabilities", "default": bool, "missing": [...]}`; `missing` lists `compute`/`utility` '
       'when absent (default when unset: `compute,utility`)'),
    _k('visibility.cuda_devices', 'object', ('probe:nvml',),
       '`{"devices": [{"cuda", "nvml_index", "uuid", "pci_bus_id", "name", "mig_uuid"?}], "unmatched": '
       'token\\|null, "order": "PCI_BUS_ID"\\|"FASTEST_FIRST", "order_certain": bool}`: each CUDA ordinal '
       'mapped to its NVML GPU; an out-of-range index or unknown UUID ends the list (`unmatched`); '
       '`order_certain` is false for different GPU models without `CUDA_DEVICE_ORDER=PCI_BUS_ID`. Written by'
       ' the `nvml` probe; reason as `nvml.gpus` when NVML did not list GPUs'),
    _k('libs.cudart_copies', 'list', ('probe:libraries',),
       'list of copy objects, in search order (below)'),
    _k('libs.cudnn_copies', 'list', ('probe:libraries', 'parser:collect_env'),
       'list of copy objects, in search order (below)'),
    _k('libs.nccl_copies', 'list', ('probe:libraries',),
       'list of copy objects, in search order (below)'),
    _k('libs.cublas_copies', 'list', ('probe:libraries',),
       'list of copy objects, in search order (below)'),
    _k('libs.loader_choice', 'object', ('probe:libraries',),
       'object soname → what a bare `dlopen("libcudart.so.12")` in the target interpreter gets (below); only'
       ' for sonames of cudart/cudnn/nccl copies found'),
    _k('libs.ldd', 'list', ('probe:libraries', 'parser:evidence'),
       'list of `{"file", "role", "resolved": {soname: path}, "not_found": [soname], "reason"?, "detail"?, '
       '"notes"?}`; `role` is `"libcudart"` (each cudart copy), `"libtorch_cuda"` '
       '(`torch/lib/libtorch_cuda.so`), `"torch._C"` (`torch/_C*.so`), `"extension:<dist>"` (known compiled '
       'CUDA extensions in site-packages: torchvision, torchaudio, xformers, flash-attn, vllm, '
       'bitsandbytes); from a pasted ldd also `"nvidia-wheel"` (a library in `site-packages/nvidia/*/lib`) and '
       '`"other"`. `reason` `timeout`/`crashed`/`failed` when ldd did not answer or exited non-zero. '
       '`resolved` lists every dependency, transitive ones included'),
    _k('libs.ld_library_path', 'list', ('probe:libraries', 'parser:evidence'),
       'list of the raw `LD_LIBRARY_PATH` entries, in order (`""` = the current directory to glibc)'),
    _k('libs.ldconfig', 'object', ('probe:libraries', 'parser:evidence'),
       'object soname → paths in cache order, for the inventoried families only; reason '
       '`absent`/`timeout`/`failed` when `ldconfig -p` could not be read'),
    _k('libs.search_dirs', 'list', ('probe:libraries',),
       'list of `{"dir", "via", "exists", "matches"}` or `{"dir", "via", "same_as"}` (a folder already '
       'searched under another name)'),
    _k('libs.wheel_dirs', 'list', ('probe:libraries',),
       "real paths of `site-packages/nvidia/*/lib` in torch's site-packages, and of `torch/lib` (the CUDA "
       'libraries torch is meant to use)'),
    _k('libs.torch_requires', 'object', ('probe:libraries',),
       "object distribution → exact version, from torch's `Requires-Dist` pins of `nvidia-*` / triton "
       '(`{"nvidia-cuda-runtime-cu12": "12.6.77"}`); `{}` for a CPU build; reason `absent` when torch is not'
       ' installed'),
    _k('toolkit.cuda_home', 'str|null', ('probe:libraries',),
       'the CUDA_HOME a `torch.utils.cpp_extension` build would use (`$CUDA_HOME`, `$CUDA_PATH`, parent of '
       '`nvcc` on PATH, `/usr/local/cuda`); `detail` says which rule. Informational'),
    _k('toolkit.nvcc_path', 'str', ('probe:libraries',),
       '`$CUDA_HOME/bin/nvcc` when executable, else `nvcc` on PATH; reason `absent` when none'),
    _k('toolkit.nvcc_version', 'str', ('probe:libraries', 'parser:collect_env', 'parser:evidence'),
       '`"13.0.88"` from `nvcc --version` (the toolkit that builds extensions, never "the runtime")'),
    _k('micro.run', 'object', ('probe:micro',),
       '`{"status": "ok"\\|"timeout"\\|"crashed"\\|…, "seconds", "deadline", "stage" (last step announced), '
       '"stage_devices" (the CUDA devices that step names, e.g. `["cuda:1"]`: the GPU a hang happened on), '
       '"torch", "devices", "requested", "cuda_init_seconds", "checks_seconds", "unusable"? {device: error},'
       ' "detail"?, "stderr_tail"?, "self_test_inject"?}`'),
    _k('micro.device', 'object', ('probe:micro',),
       'device → `{"ok", "roundtrip_equal" (H→D→H copy bit-identical), "kernel_ok", "name", "capability", '
       '"total_memory", "free_memory", "uuid", "multi_processor_count"}` (CPU: `name: "cpu"`, `threads`); a '
       'named device that cannot be used: `{"ok": false, "unusable": true, "error"}`'),
    _k('micro.matmul', 'object', ('probe:micro',),
       'device → `{"n", "ok", "dtypes": {label: {"ok", "finite", "rel_err", "row_rel_err", '
       '"freivalds_rel_err", "tolerance", "seconds" (median, CUDA events), "repeats", "tflops" (achieved, '
       '2n³/seconds)}}, "name" (the GPU, from its device touch; absent on the CPU)}`; labels `fp32`, `tf32` '
       '(sm_80+), `bf16` (where supported), `fp16`. `rel_err` = ‖out−ref‖/‖ref‖ against float64 from the '
       "same inputs (sampled rows, and every element through Freivalds' test); null when the output is not "
       'finite. Tolerances: fp32 1e-4, tf32 5e-3, bf16/fp16 1e-2. No ratio to a peak: `micro-matmul` divides '
       'by the dense datasheet peak from `compat.gpu_peaks(name)` when it judges. Reports saved before this '
       'carry `"peak_tflops"`, `"ratio"` per dtype and `"peak_model"`, `"peak_source"`, and no `"name"`; '
       'they are still judged: today\'s peaks for the GPU `micro.device` names, else for `peak_model`, else '
       'the stored ones'),
    _k('micro.transformer', 'object', ('probe:micro',),
       'device → `{"shape", "fp32": {"loss", "loss_finite", "grads_finite", "params_finite", "seconds", '
       '"tokens_per_s"}, "amp": {"dtype": "bf16"\\|"fp16", "grad_scaler", "loss_finite", "grads_finite", '
       '"grad_rel_err" (vs the fp32 step from the same weights), "grad_tolerance", "grads_close", '
       '"tokens_per_s"}, "sdpa": {"flash"\\|"mem_efficient"\\|"cudnn"\\|"math": {"usable", "rel_err"?, "why"?, '
       '"warnings"?}}, "ok"}`'),
    _k('micro.copy', 'object', ('probe:micro',),
       'GPU: device → `{"h2d", "d2h": {"bytes", "seconds", "gbps"}` (pinned host memory), `"d2d": {"bytes", '
       '"seconds", "gbps" (read + write, as CUDA\'s bandwidthTest counts), "equal"}, "roundtrip_equal", "ok", '
       '"name" (the GPU)}`; CPU: `{"h2h": {"bytes", "seconds", "gbps", "equal"}, "ok"}`. `micro-copy` compares'
       ' D→D with the memory bandwidth from `compat.gpu_peaks(name)`; old reports\' `"peak_gbps"`, `"ratio"`, '
       '`"peak_model"` are read as for `micro.matmul`'),
    _k('micro.compile', 'object', ('probe:micro',),
       'device → `{"ok", "compile_seconds", "loss_rel_err", "grad_rel_err", "tolerance", "seconds"}` '
       "(torch.compile of the encoder block's training step vs eager)"),
    _k('micro.dataloader', 'object', ('probe:micro',),
       'device it pinned for → `{"ok", "workers", "batch_bytes", "batches", "pin_memory", "shm_strategy", '
       '"mbps", "wrong_batches", "worker_stderr"}`; on failure `"error"`, `"bus_error"` (a worker died of '
       'SIGBUS: /dev/shm full), `"killed"`, `"hung"` (no batch within the pass\'s deadline), `"workers_killed"` '
       '(pids the loader watchdog ended), `"hung_at"` (the main thread\'s last frames, when the watchdog had to '
       'report the pass itself)'),
    _k('micro.multi_gpu', 'object', ('probe:micro',),
       '`{"devices", "peer_access": [[bool]], "nccl": {"status": "ok"\\|"hung"\\|"wrong"\\|"error", "detail", '
       '"seconds", "nccl_warnings" (NCCL_DEBUG=WARN lines)}, "ok"}`'),
    _k('exposure.services', 'list', ('probe:exposure',),
       'Jupyter, TensorBoard and sshd processes with a listening TCP socket (psutil): `[{"service": '
       '"jupyter"\\|"tensorboard"\\|"sshd", "pid", "uid", "listen": [{"address", "port"}], "all_interfaces": bool '
       '(0.0.0.0 or ::), "auth": null, or for Jupyter "none"\\|"token"\\|"password"\\|"default-token", "auth_from": '
       'where that was read (flag names and config paths, never a value)}]`; reason `denied` when the sockets '
       'cannot be listed'),
    _k('launch.info', 'object|null', ('probe:launch',),
       'null when no launcher variable is set (detail says so); else `{"launcher": "torchrun"\\|"slurm"\\|"env"\\|'
       '"torchrun+slurm", "rank", "world_size", "local_rank", "local_world_size", "node_rank", "master_addr", '
       '"master_port", "agent_store": bool, "run_id", "vars": {the raw variables}, "unparsable": [...]}` '
       "(`envdoctor/knowledge/launch.py`: torchrun's RANK/WORLD_SIZE/LOCAL_* win over srun's SLURM_PROCID/SLURM_NTASKS/"
       'SLURM_LOCALID/SLURM_TASKS_PER_NODE)'),
    _k('launch.master', 'object', ('probe:launch',),
       '`{"addr", "addresses": [...], "error": null\\|str, "local": bool, "loopback": bool}`: MASTER_ADDR looked up '
       'with a 2 s deadline (an IP literal and an invalid name are never looked up); reason `skipped` when not '
       'launched'),
    _k('launch.port', 'object', ('probe:launch',),
       '`{"port", "in_use": null\\|"Address already in use", "checked": bool, "address"}`: bound (and closed) only '
       "on rank 0 on the MASTER_ADDR host, outside torchrun's agent store and outside `--distributed` (whose own "
       'rendezvous answers)'),
    _k('launch.interfaces', 'object', ('probe:launch',),
       '`{name: {"up": bool (IFF_UP), "operstate"}}` from `/sys/class/net`, read when launched or when '
       'NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME is set'),
    _k('launch.hostname', 'str', ('probe:launch',),
       '`socket.gethostname()`, only for a launched rank (the cluster and fleet views name nodes by it)'),
    _k('cluster.world_size', 'int|null', ('command:distributed',),
       'how many ranks the launch asked for'),
    _k('cluster.launch', 'object', ('command:distributed',),
       "rank 0's `launcher`, `master_addr`, `master_port`, `local_world_size`, `run_id`"),
    _k('cluster.options', 'object', ('command:distributed',),
       '`{"init_timeout", "collective_timeout", "min_busbw"}`'),
    _k('cluster.fatal', 'object|null', ('command:distributed',),
       'null, or `{"phase": "store"\\|"import torch"\\|…, "error", "host_it"}` when rank 0\'s child could not '
       'host/reach the store'),
    _k('cluster.arrived', 'object', ('command:distributed',),
       'rank → `{"rank", "host", "node_rank", "local_rank", "pid", "gpu": index\\|null, "gpu_why", "gpu_uuid", '
       '"torch"}` for each rank that reached the store within `--init-timeout`'),
    _k('cluster.decision', 'object', ('command:distributed',),
       '`{"go", "backend": "nccl"\\|"gloo", "missing": [ranks], "sizes": [bytes], "iters", "arrival_seconds"}`; '
       "reason `timeout` when rank 0's child said nothing"),
    _k('cluster.collective', 'object', ('command:distributed',),
       '`{"finished": rank → {"clock", "device", "backend", "sizes": [{"bytes", "iters", "avg", "min", "max", '
       '"wrong", "first_bad"}]}, "progress": rank → {"phase", "step", "error"} for ranks that did not finish, '
       '"seconds", "stopped": null\\|why}`'),
    _k('cluster.stopped', 'str|null', ('command:distributed',),
       'null, or why the job was stopped early (SIGTERM from the launcher)'),
    _k('cluster.signatures', 'object', ('command:distributed',),
       "rank → `envdoctor.knowledge.compare.signature` of that rank's facts (`aspects`, `env`, `packages`)"),
    _k('cluster.rank_findings', 'object', ('command:distributed',),
       'rank → `[{"id", "status", "title"}]` of that rank\'s own report'),
    _k('plan.expect_gpus', 'int', ('command:check', 'command:distributed', 'command:healthcheck', 'command:exec'),
       '`--expect-gpus N` of `check`/`healthcheck`/`exec`: the GPUs this node must show (absent when not asked)'),
)

FACT_KEYS: Mapping[str, FactKey] = {entry.key: entry for entry in _ENTRIES}
if len(FACT_KEYS) != len(_ENTRIES):  # pragma: no cover - caught by the tests at once
    raise ValueError("a fact key is listed twice in envdoctor/knowledge/factkeys.py")


def lookup(key: str) -> FactKey | None:
    return FACT_KEYS.get(key)


def unknown(keys: Iterable[str]) -> list[str]:
    """The keys of ``keys`` that are not in the registry, in order."""
    return [k for k in keys if k not in FACT_KEYS]


def not_produced_by(keys: Iterable[str], producer: str) -> list[str]:
    """The keys of ``keys`` whose registry entry does not name ``producer`` (unknown keys included)."""
    return [k for k in keys if k not in FACT_KEYS or producer not in FACT_KEYS[k].producers]


class RegistryError(Exception):
    """A registration mistake that must not pass silently (duplicate or malformed id, unknown fact key).

    Defined here, where fact keys are validated, so a probe or parser validates its keys without
    importing the check registry; :mod:`envdoctor.registry` raises and re-exports the same class."""


def validate_fact_keys(keys: Iterable[str], what: str, producer: str | None = None) -> None:
    """Raise RegistryError naming ``what`` unless every key is in :mod:`envdoctor.knowledge.factkeys`
    (and, with ``producer``, lists that producer: a probe or parser writing a key the registry
    does not say it writes is a contract nobody else can see)."""
    keys = tuple(keys)
    if bad := unknown(keys):
        raise RegistryError(f"{what}: unknown fact key {bad[0]!r}" + (f" (and {len(bad) - 1} more)" if bad[1:] else "")
                            + ": no probe or parser writes it (the keys are listed in envdoctor/knowledge/factkeys.py)")
    if producer and (bad := not_produced_by(keys, producer)):
        raise RegistryError(f"{what}: fact key {bad[0]!r} is not listed as written by {producer} in "
                            "envdoctor/knowledge/factkeys.py")


def conforms(value: Any, type_: str) -> bool:
    """Whether a (thawed or frozen) value has the registry type ``type_``."""
    base, _, null = type_.partition("|")
    if value is None:
        return bool(null)
    if base == "bool":
        return isinstance(value, bool)
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if base == "str":
        return isinstance(value, str)
    if base == "list":
        return isinstance(value, (list, tuple))
    return isinstance(value, Mapping)


# -- docs/FACTS.md ---------------------------------------------------------------------------------------------
#: ``<!-- facts-table: host env -->`` … ``<!-- end facts-table -->``: the table between the two
#: markers lists every key whose namespace (the part before the first dot) is named, in registry order.
_BEGIN = "<!-- facts-table:"
_END = "<!-- end facts-table -->"


def _producers_cell(entry: FactKey) -> str:
    parts = []
    if entry.probes:
        parts.append("probe " + ", ".join(f"`{p}`" for p in entry.probes))
    if entry.parsers:
        parts.append("paste " + ", ".join(f"`{p}`" for p in entry.parsers))
    commands = [p.split(":", 1)[1] for p in entry.producers if p.startswith("command:")]
    if "distributed" in commands:
        parts.append("`check --distributed` (rank 0)")
    if others := [c for c in commands if c != "distributed"]:
        parts.append("the command line of " + ", ".join(f"`{c}`" for c in others))
    return "; ".join(parts)


def markdown_table(namespaces: Iterable[str]) -> str:
    wanted = set(namespaces)
    rows = ["| key | type | written by | value |", "| --- | --- | --- | --- |"]
    rows += [f"| {e.key} | {e.type.replace('|', ' or ')} | {_producers_cell(e)} | {e.doc} |"
             for e in _ENTRIES if e.key.split(".", 1)[0] in wanted]
    return "\n".join(rows)


def render_doc(text: str) -> str:
    """``text`` (docs/FACTS.md) with every marked table regenerated; the prose around stays as written."""
    out: list[str] = []
    lines = iter(text.splitlines())
    for line in lines:
        out.append(line)
        if not line.startswith(_BEGIN):
            continue
        namespaces = line[len(_BEGIN):].replace("-->", "").split()
        out.append(markdown_table(namespaces))
        for rest in lines:  # skip the old table up to its end marker
            if rest.strip() == _END:
                out.append(rest)
                break
        else:
            raise ValueError(f"{line.strip()} has no {_END}")
    return "\n".join(out) + "\n"


def documented_namespaces(text: str) -> set[str]:
    return {ns for line in text.splitlines() if line.startswith(_BEGIN)
            for ns in line[len(_BEGIN):].replace("-->", "").split()}


def main(argv: list[str]) -> int:
    """``python -m envdoctor.knowledge.factkeys docs/FACTS.md [--check]``: regenerate the tables in place."""
    args = list(argv)
    check_only = "--check" in args
    paths = [a for a in args if not a.startswith("--")]
    if len(paths) != 1:
        print("usage: python -m envdoctor.knowledge.factkeys docs/FACTS.md [--check]", file=sys.stderr)
        return 2
    with open(paths[0], encoding="utf-8") as fh:
        old = fh.read()
    new = render_doc(old)
    if check_only:
        if new != old:
            print(f"{paths[0]} is out of date: run python -m envdoctor.knowledge.factkeys {paths[0]}", file=sys.stderr)
            return 1
        return 0
    if new != old:
        with open(paths[0], "w", encoding="utf-8") as fh:
            fh.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
