"""The built-in probes, listed explicitly, in the order they start."""

from __future__ import annotations

from collections.abc import Iterator

from .spec import ProbeSpec


def iter_builtin_probes() -> Iterator[ProbeSpec]:
    """The built-in probes, listed explicitly. The torch probe comes first and the other probe
    modules are imported only after it is yielded: run_probes starts each probe as it arrives,
    so the slowest child (``import torch``) is already running while the rest load."""
    from . import python_probe

    yield from python_probe.PROBES
    from . import host_probe

    yield from host_probe.PROBES
    from . import exposure, launch_probe, libraries, micro, nvidia

    yield from launch_probe.PROBES
    yield from exposure.PROBES
    yield from nvidia.PROBES
    yield from libraries.PROBES
    yield from micro.PROBES


def builtin_probes() -> list[ProbeSpec]:
    return list(iter_builtin_probes())


#: The probe modules that hold the ``healthcheck`` probes (tests/test_healthcheck.py keeps this in
#: step with the ``healthcheck=True`` flags): the healthcheck imports only these, NVIDIA's first: its
#: driver child is what the healthcheck waits for, so it gets its arguments before the rest start.
HEALTHCHECK_MODULES = ("nvidia", "host_probe")


def healthcheck_probes(micro: bool = False) -> list[ProbeSpec]:
    """The ``healthcheck`` subset (and the microcheck probe with ``micro``), importing no other
    probe module."""
    import importlib

    specs = [s for name in HEALTHCHECK_MODULES
             for s in importlib.import_module(f"{__package__}.{name}").PROBES if s.healthcheck]
    if micro:
        from . import micro as micro_probe

        specs += [s for s in micro_probe.PROBES if s.micro]
    return specs
