"""The built-in checks, shipped as ``envdoctor.checks`` (never a top-level ``checks`` import).

One module per area; each module's CheckSpecs are registered in the order listed here, and
that order is the order findings are shown in. Inside this folder import siblings relatively.
"""

BUILTIN: tuple[str, ...] = (
    "host",
    "torch_build",
    "driver",
    "gpu_health",
    "libraries",
    "compat",
)
