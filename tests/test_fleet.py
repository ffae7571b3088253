"""`envdoctor diff` and `envdoctor fleet` on generated report sets, including corrupt and hostile files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envdoctor.commands.saved import diff_reports, fleet, fleet_exit, summarize_file
from envdoctor.report import Report, to_json
from tests.builders import facts

ROOT = Path(__file__).resolve().parent.parent


def write_report(path: Path, findings: list[dict[str, Any]] | None = None, **changes: Any) -> Path:
    data = json.loads(to_json(Report(facts=facts(**changes), findings=())))
    data["findings"] = findings or []
    path.write_text(json.dumps(data, indent=2))
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, "-m", "envdoctor", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_diff_orders_by_importance_and_names_judging_checks(tmp_path: Path) -> None:
    a = write_report(tmp_path / "a.json")
    b = write_report(tmp_path / "b.json", nvml__driver_version="535.183.01", torch__version="2.6.0+cu124",
                     torch__cuda_version="12.4", env__vars={"NCCL_P2P_DISABLE": "1", "PATH": "/x"},
                     python__executable="/elsewhere/python", host__kernel="6.8.0-1-generic")
    result = diff_reports(str(a), str(b))
    names = [d["name"] for d in result["differences"]]
    assert names[:3] == ["driver", "torch", "torch_build"]
    assert names.index("driver") < names.index("torch") < names.index("env:NCCL_P2P_DISABLE") < names.index("kernel")
    driver = result["differences"][0]
    assert (driver["a"], driver["b"]) == ("570.124.06", "535.183.01")
    assert {j["check"] for j in driver["judged_by"]} >= {"driver-installed", "driver-too-old"}
    # Paths and timestamps are never differences.
    assert not any("executable" in n or "path" in n.lower() or "created" in n for n in names)
    nccl = next(d for d in result["differences"] if d["name"] == "env:NCCL_P2P_DISABLE")
    assert (nccl["a"], nccl["b"]) == ("unset", "1") and nccl["judged_by"][0]["check"] == "env-vars"
    assert any(v["check"] == "env-vars" and v["b"] == "warn" for v in result["verdicts"])


def test_diff_cli_identical_and_paste(tmp_path: Path) -> None:
    a = write_report(tmp_path / "a.json")
    same = cli("diff", str(a), str(a))
    assert same.returncode == 0 and "No difference" in same.stdout
    paste = ROOT / "tests" / "corpus" / "pytorch-150733-rtx5090d-cu126.txt"
    out = cli("diff", str(a), str(paste), "--json")
    assert out.returncode == 1
    data = json.loads(out.stdout)
    assert data["b"]["kind"] == "paste" and data["differences"][0]["area"] == "driver"
    bad = cli("diff", str(a), str(tmp_path / "missing.json"))
    assert bad.returncode == 2 and bad.stderr.strip().startswith("envdoctor: error:") and "Traceback" not in bad.stderr


@pytest.fixture
def fleet_dir(tmp_path: Path) -> Path:
    d = tmp_path / "reports"
    d.mkdir()
    xid = [{"id": "gpu-xid", "status": "fail", "title": "Xid 79"}]
    for i in range(12):
        changes: dict[str, Any] = {}
        if i in (4, 9):
            changes["torch__version"] = "2.5.1+cu124"
        if i == 7:
            changes["env__vars"] = {"NCCL_ALGO": "Ring"}
        write_report(d / f"node{i:02d}.json", findings=xid if i in (3, 4) else None, **changes)
    (d / "truncated.json").write_text('{"schema_version": 1, "facts": {"torch.version": ')
    (d / "empty.json").write_text("")
    (d / "binary.json").write_bytes(b"\x00\x01\x02\xff")
    (d / "deep.json").write_text("[" * 200000)
    (d / "other.json").write_text('{"hello": "world"}')
    hostile = {"schema_version": 1, "facts": {
        "torch.version": {"value": "\u001b[2J\u001b]0;owned\u0007"}, "nvml.gpus": {"value": "x" * 50},
        "env.vars": {"value": {"NCCL_X": ["a"]}}, "python.packages": {"value": {"a": {"b": 1}}}},
        "findings": [5, {"id": None, "status": "fail"}, {"id": "x" * 500, "status": "error"}]}
    (d / "hostile\u001b[31m.json").write_text(json.dumps(hostile))
    os.mkfifo(d / "pipe.json")
    (d / "sub").mkdir()
    write_report(d / "sub" / "node99.json")
    return d


def test_fleet_groups_outliers_failures_and_skips_corrupt(fleet_dir: Path) -> None:
    result = fleet([str(fleet_dir)])
    assert result["reports"] == 14  # 12 + sub/node99 + the hostile one (readable, just odd)
    skipped = {Path(c["path"]).name: c["error"] for c in result["corrupt"]}
    assert set(skipped) == {"truncated.json", "empty.json", "binary.json", "deep.json", "other.json", "pipe.json"}
    assert "not valid JSON" in skipped["truncated.json"] and "not a regular file" in skipped["pipe.json"]
    configs = result["configurations"]
    assert configs[0]["majority"] and configs[0]["count"] == 10
    outliers = {tuple(o["nodes"]): o for o in result["outliers"]}
    torch_odd = outliers[("node04", "node09")]
    assert [(d["label"], d["this"], d["majority"]) for d in torch_odd["differs"]] == [
        ("torch", "2.5.1+cu124", "2.6.0+cu126")]
    nccl_odd = outliers[("node07",)]
    assert nccl_odd["differs"][0]["label"] == "NCCL_ALGO"
    assert result["failures_by_check"]["gpu-xid"]["nodes"] == 2
    assert result["failures_by_node"]["node03"] == ["gpu-xid"]
    assert fleet_exit(result) == 1


def test_fleet_cli_terminal_and_json(fleet_dir: Path) -> None:
    out = cli("fleet", str(fleet_dir))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "14 report(s)" in out.stdout and "Failures by check" in out.stdout
    assert "\x1b" not in out.stdout and "\\x1b" in out.stdout  # escape sequences shown, never executed
    js = cli("fleet", str(fleet_dir), "--json", "-j", "2")
    assert js.returncode == 1
    assert json.loads(js.stdout)["reports"] == 14


def test_fleet_all_alike_exits_0_and_nothing_readable_exits_2(tmp_path: Path) -> None:
    for i in range(3):
        write_report(tmp_path / f"n{i}.json")
    assert cli("fleet", str(tmp_path)).returncode == 0
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.json").write_text("{")
    assert cli("fleet", str(tmp_path / "bad")).returncode == 2
    assert cli("fleet", str(tmp_path / "nope")).returncode == 2


def test_fleet_in_parallel_matches_serial(tmp_path: Path) -> None:
    for i in range(210):  # above the threshold where worker processes are used
        write_report(tmp_path / f"n{i:03d}.json", **({"python__version": "3.12.1"} if i % 70 == 0 else {}))
    serial = fleet([str(tmp_path)], jobs=1)
    parallel = fleet([str(tmp_path)], jobs=2)
    assert serial == parallel
    assert [c["count"] for c in serial["configurations"]] == [207, 3]


def test_fleet_rejudge_uses_todays_checks(tmp_path: Path) -> None:
    write_report(tmp_path / "old.json", torch__version="2.6.0+cu126", nvml__cuda_driver_version=11080)
    s = summarize_file(str(tmp_path / "old.json"), rejudge=True)
    assert ("driver-too-old", "fail") in s.failing
    assert summarize_file(str(tmp_path / "old.json")).failing == []


def _cluster_file(path: Path) -> Path:
    from envdoctor.pipeline.cluster import ClusterOptions, build_report, cluster_json
    from tests.test_cluster_checks import _report, gathered

    g = gathered(world=3, per_node=3)
    g["rank_reports"] = {"1": _report(), "2": _report(torch__version="2.5.1+cu124")}
    info = {"world_size": 3, "local_world_size": 3, "launcher": "torchrun", "master_addr": "127.0.0.1",
            "master_port": 1, "rank": 0}
    report, cluster = build_report(g, Report(facts=facts(), findings=()), info, ClusterOptions())
    path.write_text(cluster_json(report, cluster))
    return path


def test_fleet_and_diff_read_cluster_reports_rank_by_rank(tmp_path: Path) -> None:
    path = _cluster_file(tmp_path / "cluster.json")
    result = fleet([str(path)])
    assert result["reports"] == 3
    assert [c["count"] for c in result["configurations"]] == [2, 1]
    assert result["outliers"][0]["nodes"][0].endswith("/rank2")
    d = diff_reports(str(path), f"{path}#2")
    assert d["a"]["kind"] == "cluster rank 0" and d["b"]["kind"] == "cluster rank 2"
    assert [(x["name"], x["b"]) for x in d["differences"]] == [("torch", "2.5.1+cu124")]
    bad = cli("diff", str(path), f"{path}#7")
    assert bad.returncode == 2 and "without rank 7" in bad.stderr


def test_diff_and_fleet_on_a_pipe_are_tab_separated_lines_never_wrapped(tmp_path: Path) -> None:
    """Pasted into a ticket, a table must keep every value whole: on a pipe each row is one line of
    tab-separated cells under a header line, however long a value (rich would wrap it at 80 columns)."""
    long_torch = "2.5.1+cu124." + "x" * 150
    a = write_report(tmp_path / "a.json")
    b = write_report(tmp_path / "b.json", torch__version=long_torch)
    out = cli("diff", str(a), str(b))
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert "area\twhat\tA\tB\tjudged by (A → B today)" in lines
    row = next(line for line in lines if long_torch in line)
    assert row.split("\t")[:4] == ["torch", "torch", "2.6.0+cu126", long_torch]
    assert not any(line != line.rstrip() for line in lines)
    reports = tmp_path / "fleet"
    reports.mkdir()
    for i in range(3):
        write_report(reports / f"node{i}.json")
    write_report(reports / f"odd-{'n' * 120}.json", torch__version=long_torch)
    out = cli("fleet", str(reports))
    lines = out.stdout.splitlines()
    assert out.returncode == 1 and "Configurations" in lines
    assert lines[lines.index("Configurations") + 1].startswith("#\tnodes\tdriver\ttorch\t")
    odd = next(line for line in lines if long_torch in line)
    assert f"odd-{'n' * 120}" in odd and len(odd.split("\t")) == 9


def test_diff_and_fleet_on_a_terminal_are_tables(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from envdoctor.output.fleet import render_diff, render_fleet

    a = write_report(tmp_path / "a.json")
    b = write_report(tmp_path / "b.json", torch__version="2.5.1+cu124")
    buf = io.StringIO()
    render_diff(diff_reports(str(a), str(b)), Console(file=buf, force_terminal=True, width=120, no_color=True))
    text = buf.getvalue()
    assert "\t" not in text and "judged by" in text and "2.5.1+cu124" in text
    write_report(tmp_path / "c.json")
    buf = io.StringIO()
    render_fleet(fleet([str(tmp_path)]), Console(file=buf, force_terminal=True, width=160, no_color=True))
    assert "\t" not in buf.getvalue() and "Configurations" in buf.getvalue() and "(majority)" in buf.getvalue()


def test_a_report_whose_saved_findings_are_not_a_list_is_judged_again_from_its_facts(tmp_path: Path) -> None:
    """As diagnose does: the saved verdict is unreadable, the facts are not, so the node is counted."""
    for i in range(3):
        write_report(tmp_path / f"node{i}.json")
    odd = tmp_path / "node3.json"
    write_report(odd)
    data = json.loads(odd.read_text())
    data["findings"] = "not a list"
    odd.write_text(json.dumps(data))
    result = fleet([str(tmp_path)])
    assert result["reports"] == 4 and result["corrupt"] == []
    assert result["configurations"][0]["count"] == 4
