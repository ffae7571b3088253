"""torch itself: does it import, is it a CUDA build, does it see the GPU."""

from __future__ import annotations

from typing import Any

from envdoctor import views
from envdoctor.knowledge import remedies
from envdoctor.knowledge.messages import NOT_COMPILED

from ..kit import Remediation, error, evidence, fail, ok, skip, warn
from ..model import Facts, Reason
from ..registry import CheckResult, check
from ._common import cpu_only, gpu_presence, library_errors, torch_variant
from ._torch import pip_found_no_torch

GET_STARTED = remedies.PYTORCH_GET_STARTED


def _python(facts: Facts) -> str:
    return facts.value("python.executable") or "python"


def suggested_build(facts: Facts) -> tuple[str | None, str, str]:
    """(torch version to pin, CUDA wheel variant, why) for this driver, these GPUs and this Python.

    With GPU facts: the nearest release whose wheels carry kernels for every GPU and run on the
    driver (compat.recommend). Without them: a variant the installed release is offered in, else the
    newest release, matched to the driver."""
    from envdoctor import views
    from envdoctor.knowledge import compat, recommend, versions

    from ._torch import gpus

    ccs = [g.cc for g in gpus(facts) if g.cc]
    cap = views.driver_cuda(facts)
    installed = facts.value("torch.version") or (facts.value("python.packages") or {}).get("torch")
    current = str(installed).split("+", 1)[0] if installed and versions.parse(installed) else None
    plat = views.platform_of(facts)
    if (why_cpu := cpu_only(facts)) is not None:
        return (recommend.cpu_build(current, facts.value("python.version"), plat), "cpu",
                f"This machine is CPU-only ({why_cpu}), so the CPU build is the one that fits.")
    if ccs:
        rec = recommend.recommend(ccs, cap, facts.value("python.version"), plat, current=current)
        if rec is not None:
            why = (f"{rec.reason}; {rec.driver_note}." if rec.driver_note else f"{rec.reason}.")
            return rec.torch, rec.variant, why[0].upper() + why[1:]
    minor = versions.minor_of(current) if current else None
    offered = [v for v in compat.release_variants(minor, plat) if versions.variant_cuda(v)] if minor else []
    if current and offered:
        fits = [v for v in offered if cap is None or compat.driver_runs(versions.variant_cuda(v) or "", cap) == "native"]
        if fits:
            pick = max(fits, key=lambda v: versions.cuda_to_int(versions.variant_cuda(v) or "0") or 0)
            default = compat._default_variant(minor)
            if cap is None and default in offered:
                pick = default  # without a driver to match, the release's own default build
            if cap is None:
                why = (f"No NVIDIA driver was read, so the variant cannot be matched to it; torch {minor} is offered "
                       f"for {', '.join(offered)} (table as of {compat.as_of()}); {pick}, its default build, needs a driver "
                       f"for CUDA {versions.variant_cuda(pick)} (or a newer driver of that major).")
            else:
                why = f"Your driver supports CUDA {versions.cuda_from_int(cap)}, so torch {current}+{pick} runs on it."
            return current, pick, why
    plat = views.platform_of(facts)
    variant, why = recommend.variant_for_driver(views.driver_cuda(facts), plat)
    # The variant may be an older release's (a driver too old for the newest one's): the pin is that release's
    # newest patch, never a version the variant's index does not carry.
    minor = next((m for m in compat.releases_newest_first() if variant in compat.release_variants(m, plat)), None)
    return (compat.latest_patch(minor) if minor else None), variant, why


def cuda_reinstall(facts: Facts) -> Remediation:
    """torch-cpu-build's remedy for a CPU torch on a machine that is not CPU-only: torch from the CUDA
    index. When torchvision/torchaudio do not match that torch (torch-companions' verdict), they are
    removed and installed with it in the same two commands, so torch-companions, which answers a CPU
    torch with this same remedy, and torch-cpu-build ask for one CUDA torch from one index, once."""
    from ._companions import mismatched_companions

    version, variant, reason = suggested_build(facts)
    version = version or str(facts.value("torch.version")).split("+")[0]
    companions = mismatched_companions(facts) if wants_cuda_build(facts) else ()
    also = f" with {' and '.join(companions)} (built for another torch or CUDA)" if companions else ""
    return Remediation(
        f"Reinstall torch{also} from the CUDA index. {reason} Pin it (e.g. in a constraints file) so later installs "
        "do not swap it back to the CPU build.",
        (remedies.pip_uninstall(_python(facts), ("torch", *companions)),
         remedies.torch_install(_python(facts), version, variant, companions, force=False)),
        (GET_STARTED,))


def wants_cuda_build(facts: Facts) -> bool:
    """Whether torch-cpu-build fails for want of a CUDA torch: torch is the CPU build (torch.version.cuda
    is None, or, not read, a ``+cpu`` tag), not a ROCm one, and an NVIDIA GPU is present. Where no GPU
    was seen (torch-cpu-build only warns) a CPU torch may be the one meant: its companions then come
    from the CPU index (torch-companions' own remedy)."""
    if facts.value("torch.version") is None or facts.value("torch.cuda_version"):
        return False
    if not facts.get("torch.cuda_version").ok and torch_variant(facts) != "cpu":
        return False
    return not facts.value("torch.hip_version") and cpu_only(facts) is None and gpu_presence(facts)[0] is True


def suggested_variant(facts: Facts) -> tuple[str, str]:
    """The CUDA wheel variant to install and why (see suggested_build)."""
    _, variant, why = suggested_build(facts)
    return variant, why


#: Bytes of other stdout at import above which the import is a flood (host.FLOOD_BYTES).
FLOOD_BYTES = 1 << 20


@check("torch-import", "torch imports in the target interpreter", needs=("torch.version",), judges_failures=True)
def torch_import(facts: Facts) -> CheckResult:
    reading = facts.get("torch.version")
    py = _python(facts)
    ev = evidence(facts, "torch.version", "python.executable", "python.version")
    if reading.ok and reading.value is None:
        return skip("torch's version was not read", detail="torch.version is null.", evidence=ev)
    if reading.ok:
        noise = facts.value("torch.import_noise_bytes", 0)
        if isinstance(noise, int) and not isinstance(noise, bool) and noise >= FLOOD_BYTES:
            return warn(f"torch {reading.value} imports, but printed {noise / 1e6:.1f} MB on standard output",
                        detail="Something run at `import torch` (a sitecustomize, a .pth file, a plugin or a debug "
                        "print in a patched torch) floods stdout; that output breaks tools that read it and slows "
                        "every start.", evidence=evidence(facts, "torch.version", "torch.import_noise_bytes",
                                                          "torch.path", "python.executable"),
                        remedy=Remediation("Find what prints: run the import with output to a file and look at "
                                           "its start.", (f"{py} -c 'import torch' | head -c 2000",)))
        return ok(f"torch {reading.value} imports", evidence=ev)
    if reading.reason is Reason.ABSENT:
        version, variant, why = suggested_build(facts)
        return warn("torch is not installed in the target interpreter",
                    detail=f"{py} has no torch. {why}", evidence=ev,
                    remedy=Remediation(f"Install the CPU build of torch into {py}." if variant == "cpu" else
                                       f"Install the torch build for your driver into {py}.",
                                       (remedies.torch_install(py, version, variant, force=False),),
                                       (GET_STARTED,)))
    if reading.reason in (Reason.TIMEOUT, Reason.CRASHED):
        return error("Reading torch did not finish", detail=reading.describe(), evidence=ev,
                     remedy=Remediation("Run the import by hand to see where it stops; a hang in CUDA initialisation "
                                        "usually means a wedged driver (Xid errors in the kernel log): reset the GPU "
                                        "or reboot.",
                                        (f"{py} -X faulthandler -c \"import torch; print(torch.cuda.is_available())\"",
                                         remedies.kernel_log("xid|nvrm", flags="-iE", times=True, tail=20))))
    if reading.reason is Reason.NOT_COLLECTED or reading.reason is Reason.NOT_IN_REPORT:
        return skip("torch was not examined", detail=reading.describe(), evidence=ev)
    if not facts.get("torch.import_error").ok and not library_errors(facts) and (pip := pip_found_no_torch(facts)):
        # No import error, and pip said it found no torch at all: torch is not installed, not broken.
        return skip("torch is not installed: pip found none for this Python (python-supported judges it)",
                    detail=f"pip: {pip[:200]!r}", evidence=ev)
    text = views.torch_import_error(facts) or reading.detail or "import torch failed"
    commands: list[str] = []
    # The loader grammar's reading of torch's error texts (the parsers and the python probe wrote it).
    failures = library_errors(facts)
    hint = import_hint(failures)
    links: tuple[str, ...] = (GET_STARTED,)
    if failures and failures[0].get("kind") == "missing-library" and failures[0].get("role") == "driver":
        # The driver's library (libcuda, libnvidia-ml) is not torch's to bring: reinstalling torch cannot help.
        container = facts.value("host.container")
        said = remedies.message_remedy("driver-install", py, str(container) if container else None)
        if said:
            commands.extend(said[1])
            links = said[2]
    else:
        pinned = (facts.value("python.packages") or {}).get("torch")
        version, suggested, _ = suggested_build(facts)
        variant = torch_variant(facts) or suggested
        version = str(pinned).split("+")[0] if pinned else version
        commands.append(remedies.torch_install(py, version, variant))
    return fail("import torch fails", detail=text, evidence={**ev, **evidence(facts, "torch.loader_failures")},
                remedy=Remediation(hint, tuple(commands), links))


def import_hint(failures: list[dict[str, Any]]) -> str:
    """What to do about a failed ``import torch``, from the first loader failure the loader grammar read
    (``torch.loader_failures``: its kind and the cuda_libraries family and role of the object), never from
    the error's wording; a plain reinstall when the text held no loader failure."""
    if not failures:
        return "Reinstall torch so its bundled libraries are consistent."
    first = failures[0]
    kind, library, role = first.get("kind"), first.get("library") or "a library", first.get("role")
    if kind == "missing-library" and role == "driver":
        return (f"torch cannot load {library}, which the NVIDIA driver installs (not torch): install the driver, or "
                "start the container with its GPUs (--gpus all) so the runtime mounts the driver's libraries.")
    if kind == "missing-library" and role in ("toolkit", "torch"):
        return (f"torch cannot find {library}, a CUDA library it was linked against. pip wheels bring them as "
                "nvidia-* packages; a missing or mismatched one (often after installing another package that pinned "
                "a different nvidia-* version) breaks the import. Reinstall torch with its dependencies, and remove "
                "LD_LIBRARY_PATH entries that point at an older CUDA.")
    if kind == "undefined-symbol":
        return (f"{library} lacks the symbol {first.get('symbol') or '?'}: a library torch loads was built against a "
                "different torch/CUDA (an extension or an nvidia-* package of another version). Reinstall torch and "
                "rebuild/reinstall the extension for it.")
    if kind == "version-not-found":
        return (f"{library} is older than what {first.get('required_by') or 'torch'} needs (version "
                f"{first.get('version_node') or '?'}): put a newer copy first on the loader's path (a conda "
                "environment's lib folder or LD_LIBRARY_PATH often holds an old one), then reinstall torch.")
    if kind in ("wrong-elf-class", "wrong-architecture"):
        return (f"{library} is built for another architecture than this Python: remove the folder holding it from "
                "LD_LIBRARY_PATH / PATH, and reinstall torch for this interpreter.")
    return f"torch cannot load {library}: reinstall torch so its bundled libraries are consistent."


#: The catalogue's causes whose message shows the program asking torch for CUDA (envdoctor/data/messages.json).
_ASKED_FOR_CUDA = ("torch-cpu-build", "no-visible-gpu")


@check("torch-cpu-build", "torch is a CUDA build when an NVIDIA GPU is present",
       needs=("torch.version", "torch.cuda_version"))
def torch_cpu_build(facts: Facts) -> CheckResult:
    # torch's own "Torch not compiled with CUDA enabled" (a paste) says torch.version.cuda is None
    # even when the version itself is not shown.
    said_cpu = facts.get("torch.cuda_version").ok and facts.value("torch.cuda_version") is None and any(
        NOT_COMPILED in str(m) for m in facts.value("torch.cuda_available_messages") or ())
    # A catalogued message whose words show a CPU torch where CUDA was wanted (xFormers' "built for: PyTorch … with
    # CUDA … (you have 2.1.1+cpu)") says the same: the program asked this CPU build for CUDA.
    # torch's "No CUDA GPUs are available" next to a +cpu torch is the program asking this build for CUDA too.
    said_cpu = said_cpu or any(m.get("cause") in _ASKED_FOR_CUDA
                               for m in facts.value("text.messages") or () if hasattr(m, "get"))
    cuda = facts.value("torch.cuda_version")
    if facts.value("torch.version") is None and not said_cpu and not cuda:
        return skip("torch not available", detail=facts.get("torch.version").describe(),
                    evidence=evidence(facts, "torch.version", "torch.cuda_version"))
    ev = evidence(facts, "torch.version", "torch.cuda_version", "torch.hip_version", "nvml.device_count",
                  "driver.pci_gpus")
    if cuda:
        version = facts.value("torch.version")
        return ok(f"torch {version} is built for CUDA {cuda}" if version else f"torch is built for CUDA {cuda}",
                  evidence={**evidence(facts, "torch.cuda_version"), **ev})
    if not facts.get("torch.cuda_version").ok:
        # torch.version.cuda was not read (a paste without the "CUDA used to build" line): the
        # wheel's local tag still tells a CUDA build from a CPU one; without it, nothing to judge.
        tag = torch_variant(facts)
        if tag and tag.startswith("cu"):
            return ok(f"torch {facts.value('torch.version')} is a CUDA build ({tag})", evidence=ev)
        if tag != "cpu":
            return skip("Whether torch is a CUDA build is not known",
                        detail=f"torch.version.cuda: {facts.get('torch.cuda_version').describe()}; the version "
                        f"{facts.value('torch.version')} has no +cpu/+cuXYZ tag.", evidence=ev)
    if facts.value("torch.hip_version"):
        version, variant, _ = suggested_build(facts)
        return warn("torch is a ROCm (AMD) build", detail=f"torch {facts.value('torch.version')} targets ROCm "
                    f"{facts.value('torch.hip_version')}; it cannot use NVIDIA GPUs.", evidence=ev,
                    remedy=Remediation("Install a CUDA build.",
                                       (remedies.torch_install(_python(facts), version, variant),),
                                       (GET_STARTED,)))
    present, why = gpu_presence(facts)
    if (why_cpu := cpu_only(facts)) is not None:
        if said_cpu:
            return warn("The program asked for CUDA on a machine with no NVIDIA GPU",
                        detail=f"torch {facts.value('torch.version') or ''} is the CPU build, and no CUDA build "
                        f"would help: this machine is CPU-only ({why_cpu}).", evidence=ev,
                        remedy=Remediation("Run it on a machine with an NVIDIA GPU, or let it fall back to the CPU: "
                                           "device = \"cuda\" if torch.cuda.is_available() else \"cpu\"."))
        return ok(f"torch {facts.value('torch.version')} is the CPU-only build, which fits this machine",
                  detail=f"This machine is CPU-only ({why_cpu}): a CPU build is the right one, and smaller than a CUDA "
                  "build by gigabytes of CUDA libraries this machine could not use.", evidence=ev)
    remedy = cuda_reinstall(facts)
    shown = facts.value("torch.version") if facts.get("torch.version").ok else None
    detail = (f"{f'torch {shown}' if shown else 'torch'} is the CPU-only build (torch.version.cuda is None); "
              "torch.cuda.is_available() is always False and .cuda() raises \"Torch not compiled with CUDA enabled\".")
    if present:
        return fail("torch is a CPU-only build but an NVIDIA GPU is present", detail=f"{detail} ({why}.)",
                    evidence=ev, remedy=remedy)
    if said_cpu and present is None and facts.value("host.os") != "Darwin":
        # The program asked for CUDA and this build cannot give it: that is the failure the user saw.
        return fail("torch is a CPU-only build and the program asked it for CUDA",
                    detail=f"{detail} ({facts.get('torch.cuda_version').detail}.)", evidence=ev, remedy=remedy)
    return warn("torch is a CPU-only build", detail=f"{detail} ({why}.)", evidence=ev, remedy=remedy)


@check("torch-cuda-available", "torch.cuda.is_available() is True",
       needs=("torch.cuda_available", "torch.cuda_available_messages", "torch.cuda_init_error"))
def torch_cuda_available(facts: Facts) -> CheckResult:
    variant = torch_variant(facts)
    if not facts.get("torch.cuda_version").ok and variant is None and facts.get("torch.cuda_available").ok \
            and facts.value("torch.cuda_available") is False:
        # CUDA unavailable, and neither torch's build nor its CUDA shown: the cause is not in the text, and
        # "not a CUDA build" would be a guess.
        py = _python(facts)
        return warn("torch.cuda.is_available() is False, and the text does not show why",
                    detail="The text shows torch answering False but not which torch it is (its version tag, "
                           "torch.version.cuda) nor the driver: a CPU-only build, a driver too old for torch's CUDA "
                           "and a machine or container without a GPU all answer False.",
                    evidence=evidence(facts, "torch.cuda_available", "torch.version", "torch.cuda_version"),
                    remedy=Remediation("Show torch's build and the driver, or let envdoctor read them.",
                                       (f"{py} -c \"import torch; print(torch.__version__, torch.version.cuda)\"",
                                        "nvidia-smi   # the driver and the CUDA it supports", "envdoctor check")))
    if not facts.value("torch.cuda_version") and not (variant and variant.startswith("cu")):
        return skip("Not a CUDA build of torch", detail="Judged by torch-cpu-build.",
                    evidence=evidence(facts, "torch.version"))
    ev = evidence(facts, "torch.cuda_available", "torch.cuda_available_messages", "torch.device_count",
                  "torch.cuda_init_error")
    available = facts.value("torch.cuda_available")
    init_error = facts.value("torch.cuda_init_error")
    messages = list(facts.value("torch.cuda_available_messages") or [])
    if available and not init_error:
        count = facts.value("torch.device_count")
        return ok(f"torch sees {count} CUDA device(s)" if count is not None else "torch sees CUDA", evidence=ev)
    if available is None and not init_error:
        # Not read (a paste without "Is CUDA available"), not False: nothing to judge.
        return skip("Whether torch sees CUDA is not known", detail=facts.get("torch.cuda_available").describe(),
                    evidence=ev)
    py = _python(facts)
    verify = f"{py} -c \"import torch; print(torch.cuda.is_available(), torch.cuda.device_count())\""
    text = init_error or (messages[0] if messages else "torch.cuda.is_available() returned False without a message")
    present, why = gpu_presence(facts)
    detail = f"torch says: {text}"
    if present is False:
        version = str(facts.value("torch.version") or "").split("+")[0]
        pin = version if compat_version(version) else None
        return warn("CUDA is not available to torch (no GPU on this machine)",
                    detail=f"{detail} ({why}.) A CUDA build of torch runs on the CPU only here; it carries "
                    "gigabytes of CUDA libraries this machine cannot use.", evidence=ev,
                    remedy=Remediation("Run on a machine (or container started with --gpus all) that has an NVIDIA "
                                       "GPU; if this machine is meant to be CPU-only, install the smaller CPU build.",
                                       (remedies.torch_install(py, pin, "cpu"), verify),
                                       (GET_STARTED,)))
    return fail("CUDA is not available to torch" if not available else "CUDA initialisation fails in torch",
                detail=detail + (f" ({why}.)" if present else "") + " The driver, device and library findings "
                "above say why.", evidence={**ev, "role": "symptom"},  # what a driver/library cause leads to
                remedy=Remediation("Fix the failing driver/device finding first; then verify with the command.",
                                   (verify,), (GET_STARTED,)))


def compat_version(text: str) -> bool:
    from envdoctor.knowledge import versions

    return bool(text) and versions.parse(text) is not None
