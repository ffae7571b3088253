"""Output in any encoding: what a stream cannot encode degrades, it never fails the run.

``PYTHONIOENCODING=ascii`` / ``latin-1``, or ``LC_ALL=C`` with ``PYTHONUTF8=0``, give envdoctor a
standard output that cannot hold its symbols; an environment value that is not UTF-8 reaches
Python as a lone surrogate (PEP 383), which even a UTF-8 stream cannot encode. The
``envdoctor`` error handler, installed on stdout and stderr at start-up, writes instead:

- the renderer's symbols as ASCII (``✖`` -> ``x``, ``—`` -> ``-``),
- any other character as a JSON escape (``\\u00e9``), which is also what a JSON reader decodes
  back, so ``report --json`` stays valid JSON in ASCII,
- a lone surrogate as U+FFFD (``\\ufffd`` where even that cannot be encoded): JSON parsers that
  refuse lone surrogates still read it.
"""

from __future__ import annotations

import codecs

NAME = "envdoctor"

#: The glyphs the renderers and messages use, in ASCII.
ASCII = {"✖": "x", "✔": "ok", "▲": "!", "⁉": "?!", "·": "-", "—": "-", "–": "-", "↗": "->", "→": "->",
         "≠": "!=", "≥": ">=", "≤": "<=", "…": "...", "•": "*", "×": "x", "‘": "'", "’": "'", "“": '"', "”": '"'}


def _escape(ch: str) -> str:
    code = ord(ch)
    if code > 0xFFFF:  # as JSON writes it: a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def _handler(exc: UnicodeError) -> tuple[bytes, int]:
    # Bytes, already encoded: a codec takes back only ASCII text from a handler (UTF-8's does).
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for ch in exc.object[exc.start:exc.end]:
        if 0xD800 <= ord(ch) <= 0xDFFF:
            try:
                out.append("\ufffd".encode(exc.encoding))
            except (UnicodeError, LookupError):
                out.append(b"\\ufffd")
        else:
            out.append((ASCII.get(ch) or _escape(ch)).encode("ascii"))
    return b"".join(out), exc.end


codecs.register_error(NAME, _handler)


def degrade(stream: object) -> None:
    """Make ``stream`` (a text stream) write what it cannot encode with the ``envdoctor`` handler."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is None:
        return
    try:
        reconfigure(errors=NAME)
    except (ValueError, OSError, TypeError, AttributeError):
        pass


def console_width() -> int | None:
    """The width to give the console: None (rich reads ``COLUMNS`` or the terminal) unless
    ``COLUMNS`` is set to something that is no positive width (``COLUMNS=0`` made rich write
    nothing at all); then the terminal's width, else 80."""
    import os
    import shutil

    raw = os.environ.get("COLUMNS")
    if raw is None or (raw.strip().isdigit() and int(raw) > 0):
        return None
    return shutil.get_terminal_size((80, 24)).columns or 80
