"""The torch child's command line, as :meth:`envdoctor.process.host.Host.run_child` builds it for
``probes/python_probe.py`` and ``probes/torch_child.py``: start-up
(:mod:`envdoctor.pipeline.startup`) starts it from the Plan before click is imported, and the
probe adopts it. Its arguments come from :mod:`envdoctor.process.childargs`, which the probes ask too.

Only the standard library is imported here, and little of it.
"""

from __future__ import annotations

import os
from typing import Any

from envdoctor.process import childargs

SCRIPT = childargs.TORCH_SCRIPT
#: The environment a child gets on top of the Host's (as Host.run_child builds it).
CHILD_ENV = {"PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1"}


def command_for(python: str, micro: dict[str, Any] | None = None) -> tuple[str, ...]:
    import json

    script = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "child", f"{SCRIPT}.py")
    return (python, script, json.dumps(childargs.torch_args(micro)))
