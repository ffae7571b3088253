"""The report's JSON Schema: its ``$id``, the file shipped in the package, and how to resolve one to the other.

Every report carries ``"$schema": SCHEMA_ID``. The id is a URN, not a web address: the document it names
is the file ``envdoctor/data/report.schema.json`` inside the installed package, so it resolves offline
and always to the schema of the envdoctor that wrote the report. :func:`retrieve` is that resolution
(usable as a ``referencing`` retrieve callback); ``python -m envdoctor.knowledge.schema`` prints the schema
(``--path``: where the file is).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from envdoctor.model import SCHEMA_VERSION

if TYPE_CHECKING:
    from importlib.abc import Traversable

#: The id of the report schema of this :data:`~envdoctor.model.SCHEMA_VERSION`, the value of every
#: report's ``$schema``; a later incompatible schema gets a new version and so a new id.
SCHEMA_ID = f"urn:envdoctor:schema:report:{SCHEMA_VERSION}"
RESOURCE = "data/report.schema.json"


def path() -> Traversable:
    """The schema file shipped in the package."""
    from importlib import resources

    return resources.files("envdoctor").joinpath(RESOURCE)


@functools.cache
def text() -> str:
    from envdoctor.knowledge import datafiles

    return datafiles.read_text(RESOURCE.removeprefix("data/"))


def schema() -> Mapping[str, Any]:
    """The parsed schema (a fresh copy: callers may hand it to validators that annotate it)."""
    return json.loads(text())


def retrieve(uri: str) -> Mapping[str, Any]:
    """The schema document an id names; KeyError for an id this envdoctor does not ship."""
    if uri.rstrip("#") != SCHEMA_ID:
        raise KeyError(f"{uri!r} is not the id of a schema this envdoctor ships ({SCHEMA_ID})")
    return schema()


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if args in ([], ["--json"]):
        sys.stdout.write(text())
        return 0
    if args == ["--path"]:
        print(path())
        return 0
    if args == ["--id"]:
        print(SCHEMA_ID)
        return 0
    print("usage: python -m envdoctor.knowledge.schema [--path | --id]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
