"""Reading the data files shipped in the package (``envdoctor/data/``): the one way compat, errors
and the schema read theirs.

A plain read next to this module when the package is installed as files (a wheel, an editable
checkout): ``importlib.resources`` costs more to import (zipfile, tempfile, pathlib) than the whole
judging of a report, and every ``diagnose FILE`` paid it. A package that is not on the file system
(a zip import) is read through ``importlib.resources``.
"""

from __future__ import annotations

import os

_HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


def read_text(name: str) -> str:
    """The text of ``data/<name>`` (UTF-8)."""
    try:
        with open(os.path.join(_HERE, name), encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        from importlib import resources

        return resources.files("envdoctor").joinpath(f"data/{name}").read_text(encoding="utf-8")
