"""Helpers shared by the child scripts (stdlib only; importable because the scripts' own folder
is sys.path[0] when they run)."""

import json
import sys
import traceback

MARK = "@@envdoctor@@ "
_out = sys.stdout


def args():
    try:
        return json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    except ValueError:
        return {}


def emit(**record):
    """Print one record; flushed at once so a later hang or crash cannot lose it."""
    _out.write(MARK + json.dumps(record, default=str) + "\n")
    _out.flush()


def stage(name):
    emit(_stage=name)


def done(**record):
    record["_done"] = True
    emit(**record)


def error_text(exc):
    """The last line of a traceback, as users see it ('ImportError: libcudart.so.12: ...')."""
    lines = traceback.format_exception_only(type(exc), exc)
    return "".join(lines).strip()[-2000:]
