"""compat.json's torch_arch_lists agree with what real wheels said: ``torch.cuda.get_arch_list()``
recorded from public threads (tests/fixtures/recorded_arch_lists.json, each with its thread)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envdoctor.knowledge import compat

RECORDS = json.loads((Path(__file__).parent / "fixtures" / "recorded_arch_lists.json").read_text())["records"]


@pytest.mark.parametrize("record", RECORDS, ids=[r["torch"] for r in RECORDS])
def test_the_table_gives_the_arch_list_the_wheel_printed(record: dict[str, Any]) -> None:
    assert record["source"].startswith("https://github.com/") and record["date"]
    version, variant = record["torch"].split("+")
    table = compat.arch_list(version, variant, record["platform"])
    assert table is not None, f"{record['torch']} is not in torch_arch_lists"
    printed = compat.parse_arch_list(record["arch_list"])
    assert sorted(table.sass) == sorted(printed.sass), (table.describe(), printed.describe())
    assert sorted(table.ptx) == sorted(printed.ptx), (table.describe(), printed.describe())
