"""The built-in checks, shipped as ``envdoctor.checks`` (never a top-level ``checks`` import).

One module per area; each module's CheckSpecs are registered in the order listed here, and
that order is the order findings are shown in. Inside this folder import siblings relatively.
"""

# Root causes before symptoms: when several checks fail, the first failing finding is the one
# to fix first. torch_build comes after the driver, library and compatibility checks because
# "torch.cuda.is_available() is False" is usually the consequence of one of them.
BUILTIN: tuple[str, ...] = (
    "host",
    "exposure",
    "launch",
    "evidence",
    "driver",
    "gpu_health",
    "libraries",
    "compat",
    "loader",
    "torch_build",
    "messages",
    "micro",
    "expect",
)

#: The modules holding the ``healthcheck=True`` checks (tests/test_healthcheck.py keeps this in
#: step): the healthcheck loads only these, and ``micro`` only with ``--micro``.
HEALTHCHECK: tuple[str, ...] = ("host", "driver", "gpu_health", "expect")
