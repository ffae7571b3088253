"""Read what a wheel on PyPI says about itself without downloading it: the ``*.dist-info/METADATA`` and
``torch/version.py`` members, fetched with HTTP range requests (the zip's end record, its central
directory, then one member). Used only by ``tools/gen_torch_wheels.py --refresh`` (network); tests never
call it."""

from __future__ import annotations

import json
import re
import struct
import urllib.parse
import urllib.request
import zlib
from typing import Any

PYPI = "https://pypi.org"
_TIMEOUT = 120


def _get(url: str, headers: dict[str, str] | None = None) -> bytes:
    req = urllib.request.Request(url, headers={"User-Agent": "envdoctor-tools", **(headers or {})})
    with urllib.request.urlopen(req, timeout=_TIMEOUT) as resp:  # PyPI only, https
        return bytes(resp.read())


def project(name: str) -> dict[str, Any]:
    """PyPI's JSON API for a project (every release and its files)."""
    return json.loads(_get(f"{PYPI}/pypi/{name}/json"))


def file_url(api_url: str, file_row: dict[str, Any]) -> str:
    """A file row's absolute URL (the API may give it relative to itself)."""
    return urllib.parse.urljoin(api_url, str(file_row["url"]))


def _range(url: str, start: int, end: int) -> bytes:
    return _get(url, {"Range": f"bytes={start}-{end}"})


def members(url: str, size: int, wanted: list[re.Pattern[str]]) -> dict[str, str]:
    """The text of the zip members whose names match one of ``wanted`` (first match per pattern)."""
    tail = _range(url, max(0, size - 65536), size - 1)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0:
        raise ValueError(f"{url}: no zip end record")
    cd_size, cd_off = struct.unpack("<II", tail[at + 12:at + 20])
    if cd_off == 0xFFFFFFFF:  # zip64: the end-of-central-directory locator precedes the end record
        loc = tail.rfind(b"PK\x06\x07", 0, at)
        (z64_off,) = struct.unpack("<Q", tail[loc + 8:loc + 16])
        rec = _range(url, z64_off, z64_off + 56)
        cd_size, cd_off = struct.unpack("<QQ", rec[40:56])
    cd = _range(url, cd_off, cd_off + cd_size - 1)
    found: dict[str, tuple[int, int, int]] = {}
    pos = 0
    while pos + 46 <= len(cd) and cd[pos:pos + 4] == b"PK\x01\x02":
        method = struct.unpack("<H", cd[pos + 10:pos + 12])[0]
        csize = struct.unpack("<I", cd[pos + 20:pos + 24])[0]
        n, m, k = struct.unpack("<HHH", cd[pos + 28:pos + 34])
        offset = struct.unpack("<I", cd[pos + 42:pos + 46])[0]
        name = cd[pos + 46:pos + 46 + n].decode("utf-8", "replace")
        for rx in wanted:
            if rx.pattern not in found and rx.fullmatch(name):
                found[rx.pattern] = (offset, csize, method)
        pos += 46 + n + m + k
    out: dict[str, str] = {}
    for pattern, (offset, csize, method) in found.items():
        head = _range(url, offset, offset + 30 + 1024 + csize)
        ln, le = struct.unpack("<HH", head[26:30])
        raw = head[30 + ln + le:30 + ln + le + csize]
        data = zlib.decompress(raw, -15) if method == 8 else raw
        out[pattern] = data.decode("utf-8", "replace")
    return out
