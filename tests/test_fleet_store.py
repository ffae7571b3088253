"""The fleet store: `fleet DIR --store fleet.parquet` and `fleet fleet.parquet` print the same
result; no secret reaches the file; the README's DuckDB query lists `fleet`'s outliers; a small
version of bench/fleet_store.py counts what it generated."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envdoctor.commands import store as columnar
from envdoctor.commands.saved import fleet
from envdoctor.redact import redact_tree
from envdoctor.report import Report, to_json
from tests.builders import facts
from tests.ci import in_ci
from tests.test_fleet import _cluster_file, write_report

ROOT = Path(__file__).resolve().parent.parent
SECRET = "ghp_" + "Q7x9TzR2mK4vW8yN1pL6sD3fH5jB0cA2eG4i"  # a GitHub token's shape, made up

# pyarrow and duckdb are in the [test] extra: skipped only where they are truly absent, never in CI.
if in_ci():
    import pyarrow as pa
    import pyarrow.parquet as pq
else:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")


def _result(items: list[str], **kw: Any) -> Any:
    return redact_tree(fleet(items, **kw))


def _text(result: Any) -> str:
    """The tables as `fleet` prints them on a pipe."""
    from rich.console import Console

    from envdoctor.output.fleet import render_fleet

    out = io.StringIO()
    render_fleet(result, Console(file=out, force_terminal=False, width=200))
    return out.getvalue()


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    d = tmp_path / "reports"
    d.mkdir()
    per_gpu = [{"id": "gpu-xid", "status": "fail", "title": "Xid 79", "gpus": [1, 3]},
               {"id": "gpu-ecc", "status": "error", "title": "the check failed"},
               {"id": "env-vars", "status": "ok", "title": "fine"}]
    for i in range(12):
        changes: dict[str, Any] = {}
        if i in (4, 9):
            changes["torch__version"] = "2.5.1+cu124"
        if i == 7:
            changes["env__vars"] = {"NCCL_ALGO": "Ring"}
        if i == 10:
            changes["nvml__driver_version"] = "535.183.01"
        write_report(d / f"node{i:02d}.json", findings=per_gpu if i in (3, 4) else [{"id": "env-vars", "status": "ok",
                                                                                    "title": "fine"}], **changes)
    write_report(d / "bare.json")  # no finding at all: still a node
    _cluster_file(d / "cluster.json")
    (d / "truncated.json").write_text('{"schema_version": 1, "facts": {"torch.version": ')
    (d / "binary.json").write_bytes(b"\x00\x01\x02\xff")
    return d


def test_store_round_trip_prints_the_same_tables(reports: Path, tmp_path: Path) -> None:
    store = tmp_path / "fleet.parquet"
    items = [str(reports), str(tmp_path / "missing.json")]
    direct = _result(items, store=str(store))
    back = _result([str(store)])
    assert back == direct
    assert _text(back) == _text(direct)
    assert direct["reports"] == 16 and len(direct["corrupt"]) == 3 and len(direct["outliers"]) >= 3
    # Per GPU rows, the report without findings, the unreadable files: all in the file.
    table = pq.read_table(store)
    rows = table.to_pylist()
    assert {(r["node"], r["gpu"]) for r in rows if r["check"] == "gpu-xid"} >= {("node03", 1), ("node03", 3)}
    assert any(r["node"] == "bare" and r["check"] is None and r["status"] is None for r in rows)
    assert sum(r["status"] == "unreadable" for r in rows) == 3
    assert table.schema.metadata[b"envdoctor.store"] == b"1"
    assert {"report", "node", "check", "status", "gpu", "config", "driver", "torch", "gpus", "report_time",
            "envdoctor_version"} <= set(table.schema.names)
    node3 = next(r for r in rows if r["node"] == "node03")
    assert node3["envdoctor_version"] and node3["report_time"] is not None and node3["driver"] == "570.124.06"
    # No temporary file is left beside the store.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.parquet", "reports"]


def test_store_round_trip_in_parallel_and_rejudged(reports: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("envdoctor.commands.saved._POOL_MIN", 2)
    monkeypatch.setattr(columnar, "BATCH", 4)  # many row groups: reports cross batch boundaries when read
    store = tmp_path / "fleet.parquet"
    direct = _result([str(reports)], jobs=2, store=str(store))
    assert _result([str(store)]) == direct == _result([str(reports)])
    rejudged = tmp_path / "rejudged.parquet"
    today = _result([str(reports)], rejudge=True, store=str(rejudged))
    assert _result([str(rejudged)]) == today
    assert pq.read_metadata(store).num_row_groups > 3


def test_store_read_in_small_batches_keeps_each_reports_failures(reports: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "fleet.parquet"
    direct = _result([str(reports)], store=str(store))
    real = pq.ParquetFile.iter_batches

    def tiny(self: Any, batch_size: int = 0, **kw: Any) -> Any:
        return real(self, batch_size=1, **kw)  # every row its own batch: a report spans many

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", tiny)
    assert _result([str(store)]) == direct


def test_a_planted_secret_never_reaches_the_parquet_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columnar, "COMPRESSION", "none")  # the bytes as they are, so a search can see them
    d = tmp_path / "r"
    d.mkdir()
    marker = "visible-marker-7731"
    for i in range(3):
        write_report(d / f"n{i}.json", findings=[{"id": "env-vars", "status": "ok", "title": "x"}],
                     env__vars={"NCCL_IB_HCA": SECRET, "NCCL_NET": f"token={SECRET}", "CUDA_VISIBLE_DEVICES": marker},
                     python__packages={"torch": "2.6.0+cu126", "evil": f"https://u:{SECRET}@h/x"},
                     launch__hostname=f"node{i}-{SECRET}" if i else "node0")
    (d / f"report-{SECRET}.json").write_text("{")
    store = tmp_path / "fleet.parquet"
    direct = _result([str(d)], store=str(store))
    data = store.read_bytes()
    assert marker.encode() in data  # the search sees plain strings in this file
    assert SECRET.encode() not in data and SECRET[4:20].encode() not in data
    assert SECRET not in json.dumps(direct)
    assert _result([str(store)]) == direct


def test_the_default_store_is_compressed_and_still_secret_free(tmp_path: Path) -> None:
    d = tmp_path / "r"
    d.mkdir()
    write_report(d / "n.json", env__vars={"NCCL_SOCKET_IFNAME": SECRET})
    store = tmp_path / "s.parquet"
    fleet([str(d)], store=str(store))
    assert pq.ParquetFile(store).metadata.row_group(0).column(0).compression == "ZSTD"
    assert SECRET not in json.dumps(pq.read_table(store).to_pylist(), default=str)


def _readme_query() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- fleet-store-outliers -->\n```sql\n(.*?)```", text, re.S)
    assert found, "README: the DuckDB query under <!-- fleet-store-outliers -->"
    return found.group(1)


def _duckdb() -> Any:
    if importlib.util.find_spec("duckdb") is None and not in_ci():
        pytest.skip("duckdb is not installed (pip install -e '.[test]')")
    import duckdb

    return duckdb


@pytest.mark.parametrize("tie", [False, True])
def test_the_readme_duckdb_query_lists_fleets_outliers(reports: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch, tie: bool) -> None:
    duckdb = _duckdb()
    if tie:  # two configurations of one node each: no majority, every configuration listed
        for name in os.listdir(reports):
            os.unlink(reports / name)
        write_report(reports / "a.json")
        write_report(reports / "b.json", torch__version="2.5.1+cu124")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    result = json.loads(json.dumps(_result([str(reports)], store="fleet.parquet")))
    rows = duckdb.connect().sql(_readme_query()).fetchall()
    want = [(o["nodes"], next(c for c in result["configurations"] if c["id"] == o["config"])) for o in result["outliers"]]
    assert [(r[0], list(r[1])) for r in rows] == [(c["count"], nodes) for nodes, c in want]
    for row, (_, config) in zip(rows, want, strict=True):
        asp = config["aspects"]
        assert row[2:7] == (asp["driver"], asp["cuda_driver"], asp["torch"], asp["torch_build"], asp["gpus"])
    assert len(rows) == (2 if tie else len(result["configurations"]) - 1)


def test_the_readme_commands_run(reports: Path, tmp_path: Path) -> None:
    """The README's two lines, as a user types them, in a folder holding reports/."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```\n(envdoctor fleet reports/ --store fleet\.parquet\nenvdoctor fleet fleet\.parquet\n)```", text)
    assert block
    env = {**os.environ, "NO_COLOR": "1", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    outs = []
    for line in block.group(1).splitlines():
        argv = [sys.executable, "-m", "envdoctor", *line.split()[1:]]
        proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        outs.append(proc.stdout)
    assert outs[0] == outs[1] and "Configurations" in outs[0]


def test_without_pyarrow_one_line_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from envdoctor.commands.cli import main

    d = tmp_path / "r"
    d.mkdir()
    write_report(d / "n.json")
    store = tmp_path / "s.parquet"
    fleet([str(d)], store=str(store))
    for name in ("pyarrow", "pyarrow.parquet"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails as when it is not installed
    for args in (["fleet", str(d), "--store", str(tmp_path / "t.parquet")], ["fleet", str(store)]):
        got = CliRunner().invoke(main, args)
        assert got.exit_code == 2, got.output
        lines = got.output.strip().splitlines()
        assert len(lines) == 1 and "-m pip install 'pyarrow>=16'" in lines[0] and "Traceback" not in got.output
    assert not (tmp_path / "t.parquet").exists()


def test_not_a_store_and_store_into_store_are_one_line_refusals(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from envdoctor.commands.cli import main

    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), other)
    got = CliRunner().invoke(main, ["fleet", str(other)])
    assert got.exit_code == 2 and "not an envdoctor fleet store" in got.output and len(got.output.splitlines()) == 1
    d = tmp_path / "r"
    d.mkdir()
    write_report(d / "n.json")
    store = tmp_path / "s.parquet"
    fleet([str(d)], store=str(store))
    got = CliRunner().invoke(main, ["fleet", str(store), "--store", str(tmp_path / "t.parquet")])
    assert got.exit_code == 2 and "already a store" in got.output
    got = CliRunner().invoke(main, ["fleet", str(d), "--store", str(tmp_path / "no" / "such" / "s.parquet")])
    assert got.exit_code == 2 and "does not exist" in got.output and "Traceback" not in got.output
    # A store inside the folder being read is the fleet's own output: neither a second input nor a broken report.
    (d / "s.parquet").write_bytes(store.read_bytes())
    result = _result([str(d)])
    assert result["reports"] == 1 and not result["corrupt"]


def test_small_bench_counts_what_it_generated(tmp_path: Path) -> None:
    """bench/fleet_store.py at 2,000 reports, in process: correctness, never time."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import fleet_store as bench
    finally:
        sys.path.remove(str(ROOT / "bench"))
    base = json.loads(to_json(Report(facts=facts(), findings=())))
    base["findings"] = [{"id": "env-vars", "status": "ok", "title": "fine", "gpus": []}]
    expected = bench.generate(str(tmp_path / "reports"), base, 2000, per_folder=500)
    assert expected["configurations"] >= 6 and expected["failing_nodes"] > 50
    store = tmp_path / "fleet.parquet"
    direct = _result([str(tmp_path / "reports")], jobs=2, store=str(store))
    assert bench.verify(direct, expected) == []
    assert _result([str(store)]) == direct
    rows = pq.read_table(store, columns=["report", "check", "gpu"]).to_pylist()
    assert sum(r["check"] == "gpu-ecc" for r in rows) == 8 * 2000  # one per GPU of every node


def test_a_store_with_columns_of_the_wrong_types_is_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from envdoctor.commands.cli import main

    cols = {name: pa.array([1, 2]) for name in columnar._READ}
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table(cols).replace_schema_metadata({b"envdoctor.store": b"1"}), bad)
    got = CliRunner().invoke(main, ["fleet", str(bad)])
    assert got.exit_code == 2 and isinstance(got.exception, SystemExit) and "Traceback" not in got.output, got.output
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"PAR1" + b"\x00" * 100)
    got = CliRunner().invoke(main, ["fleet", str(garbage)])
    assert got.exit_code == 2 and len(got.output.strip().splitlines()) == 1, got.output


def test_a_store_written_into_the_reports_folder_is_not_read_back_as_a_broken_report(tmp_path: Path) -> None:
    d = tmp_path / "r"
    d.mkdir()
    for i in range(3):
        write_report(d / f"n{i}.json")
    first = fleet([str(d)], store=str(d / "fleet.parquet"))
    again = fleet([str(d)], store=str(d / "fleet.parquet"))
    assert not again["corrupt"] and again["reports"] == first["reports"] == 3


def test_the_install_line_names_the_fleet_extras_requirement_from_pyproject() -> None:
    """One home: the version floor printed is the one pyproject.toml's ``fleet`` extra declares."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["fleet"]
    assert columnar.fleet_requirement() in declared
    assert columnar.install_line().endswith(f"-m pip install '{columnar.fleet_requirement()}'")
