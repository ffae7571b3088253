"""Cluster checks on cluster facts (what rank 0 gathers): missing ranks, odd ranks, a stalled rank,
a wrong sum, --min-busbw, clock skew; and the node table built from them."""

from __future__ import annotations

import copy
from typing import Any

from envdoctor.checks import cluster as cc

from envdoctor.knowledge.compare import member_ranges, signature
from envdoctor.model import Facts, Status
from envdoctor.pipeline.cluster import ClusterOptions, build_report, cluster_readings
from envdoctor.pipeline.diagnose import diagnose
from envdoctor.report import Report
from tests.builders import facts as node_facts


def _report(**changes: Any) -> dict[str, Any]:
    rep = Report(facts=node_facts(**changes), findings=())
    return rep.to_dict()


def _done(rank: int, avg: float = 0.01, wrong: int = 0, clock: float = 1000.0) -> dict[str, Any]:
    sizes = [{"bytes": 1 << 20, "iters": 5, "avg": avg / 10, "min": avg / 10, "max": avg / 10, "wrong": 0},
             {"bytes": 1 << 24, "iters": 5, "avg": avg, "min": avg, "max": avg, "wrong": wrong}]
    return {"clock": clock, "device": "cpu", "backend": "gloo", "sizes": sizes}


def gathered(world: int = 4, per_node: int = 2, missing: tuple[int, ...] = (), finished: Any = None,
             progress: Any = None) -> dict[str, Any]:
    arrived = {str(r): {"rank": r, "host": f"node{r // per_node}", "node_rank": r // per_node,
                        "local_rank": r % per_node, "gpu": None} for r in range(world) if r not in missing}
    done = finished if finished is not None else {str(r): _done(r) for r in range(world) if r not in missing}
    return {"arrived": arrived,
            "decision": {"go": not missing, "backend": "gloo", "missing": list(missing), "sizes": [1 << 20, 1 << 24],
                         "iters": 5, "arrival_seconds": 1.5},
            "collective": {"finished": done, "progress": progress or {}, "seconds": 0.4, "stopped": None}}


def judge(g: dict[str, Any], reports: dict[str, Any] | None = None, world: int = 4, per_node: int = 2,
          **opts: Any) -> list[Any]:
    info = {"world_size": world, "local_world_size": per_node, "launcher": "torchrun", "master_addr": "127.0.0.1",
            "master_port": 29500}
    reports = reports if reports is not None else {str(r): _report() for r in range(world)}
    readings = cluster_readings(g, reports, info, ClusterOptions(init_timeout=5, collective_timeout=5, **opts), None)
    return diagnose(Facts(readings), cc.CHECKS)


def by_id(findings: list[Any], cid: str) -> list[Any]:
    return [f for f in findings if f.id == cid]


def test_healthy_cluster() -> None:
    found = judge(gathered())
    assert {f.status for f in found} <= {Status.OK, Status.SKIP}
    (ar,) = by_id(found, "cluster-allreduce")
    # busbw = algbw * 2(n-1)/n: 16 MiB in 10 ms on 4 ranks.
    expected = (1 << 24) / 0.01 / 1e9 * 2 * 3 / 4
    assert f"16 MiB: {expected:.2f} GB/s" in ar.title


def test_missing_ranks_named_by_node() -> None:
    found = judge(gathered(missing=(2, 3)))
    (rv,) = by_id(found, "cluster-rendezvous")
    assert rv.status is Status.FAIL and "ranks 2-3" in rv.title
    assert "rank 2 (node 1, whose ranks all missed the rendezvous)" in rv.detail
    found = judge(gathered(missing=(3,)))
    (rv,) = by_id(found, "cluster-rendezvous")
    assert "rank 3 (node 1, host node1)" in rv.detail
    assert by_id(found, "cluster-finished")[0].status is Status.SKIP


def test_odd_rank_named_with_majority() -> None:
    reports = {str(r): _report() for r in range(4)}
    reports["3"] = _report(torch__version="2.5.1+cu124")
    found = judge(gathered(), reports)
    odd = [f for f in by_id(found, "cluster-consistency") if f.status is Status.FAIL]
    assert len(odd) == 1
    assert odd[0].title == ("torch differs: rank 3 (node1) has 2.5.1+cu124, where the majority (3 of 4 ranks) "
                            "has 2.6.0+cu126")
    assert "torch-import" in odd[0].detail


def test_odd_node_and_per_rank_visible_devices() -> None:
    reports = {str(r): _report(env__vars={"CUDA_VISIBLE_DEVICES": str(r % 2)}) for r in range(4)}
    for r in ("2", "3"):
        reports[r] = _report(env__vars={"CUDA_VISIBLE_DEVICES": str(int(r) % 2), "NCCL_IB_DISABLE": "1"})
    found = judge(gathered(), reports)
    titles = [f.title for f in by_id(found, "cluster-consistency")]
    assert titles == ["NCCL_IB_DISABLE differs: node 1 (node1, ranks 2-3) have 1, where it is unset on rank 0's "
                      "side (2 of 4 ranks, no majority)"]


def test_stalled_rank_named_and_waiters_told_apart() -> None:
    progress = {"0": {"phase": "barrier", "step": 4}, "1": {"phase": "barrier", "step": 4},
                "2": {"phase": "formed process group", "step": 3},
                "3": {"phase": "failed in the collective", "step": 4, "error": "RuntimeError: Connection reset"}}
    found = judge(gathered(finished={}, progress=progress))
    (fin,) = by_id(found, "cluster-finished")
    assert fin.status is Status.FAIL and fin.title.startswith("rank 2 (node1) stopped before finishing")
    assert "waited for rank 2 (node1)" in fin.detail and "Connection reset" in fin.detail


def test_wrong_sum_min_busbw_slow_rank() -> None:
    done = {str(r): _done(r) for r in range(4)}
    done["1"] = _done(1, wrong=2)
    done["3"] = _done(3, avg=0.05)
    found = judge(gathered(finished=done), min_busbw=100.0)
    statuses = {f.title.split(" ")[0]: f.status for f in by_id(found, "cluster-allreduce")}
    titles = " | ".join(f.title for f in by_id(found, "cluster-allreduce"))
    assert "All-reduce result is wrong on rank 1 (node0)" in titles
    assert "below --min-busbw 100 GB/s" in titles
    assert "rank 3 (node1) is slower than the others" in titles
    assert Status.FAIL in statuses.values()


def test_clock_skew() -> None:
    done = {str(r): _done(r) for r in range(4)}
    done["2"] = _done(2, clock=1003.5)
    (clk,) = by_id(judge(gathered(finished=done)), "cluster-clock")
    assert clk.status is Status.WARN and "+3.5 s" in clk.title


def test_rank_findings_grouped() -> None:
    reports = {str(r): _report() for r in range(4)}
    bad = copy.deepcopy(reports["1"])
    bad["findings"] = [{"id": "gpu-xid", "status": "fail", "title": "Xid 79 on GPU 0"}]
    reports["1"] = bad
    (rf,) = by_id(judge(gathered(), reports), "cluster-rank-findings")
    assert rf.status is Status.FAIL and rf.title == "gpu-xid on rank 1 (node0): Xid 79 on GPU 0"


def test_store_failure_is_a_fail_not_an_error() -> None:
    g = {"fatal": {"phase": "store", "error": "DistNetworkError: ... errno: 98 - Address already in use",
                   "host_it": True}}
    found = judge(g)
    (rv,) = by_id(found, "cluster-rendezvous")
    assert rv.status is Status.FAIL and "port is already in use" in rv.title
    assert all(f.status is not Status.ERROR for f in found if f.id == "cluster-rendezvous")


def test_build_report_table_marks_odd_cells() -> None:
    local = Report(facts=node_facts(), findings=())
    g = gathered(world=2, per_node=1)
    g["rank_reports"] = {"1": _report(python__version="3.10.1")}
    info = {"world_size": 2, "local_world_size": 1, "launcher": "torchrun", "master_addr": "127.0.0.1",
            "master_port": 1, "rank": 0}
    report, cluster = build_report(g, local, info, ClusterOptions())
    rows = cluster["table"]["rows"]
    assert rows[1]["odd"] == ["python"] and rows[0]["odd"] == []
    assert report.exit_code() == 1


def test_signature_survives_hostile_values() -> None:
    from envdoctor.knowledge.compare import raw_getter

    sig = signature(raw_getter({"nvml.gpus": {"value": [1, "x", {"name": ["no"], "memory_total": "big"}]},
                                "env.vars": {"value": "not a dict"}, "torch.version": {"value": {"a": 1}},
                                "python.packages": {"value": [1, 2]}}))
    assert sig["aspects"]["torch"] is None and sig["env"] == {} and sig["packages"] == {}
    assert member_ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"


def test_two_ranks_on_one_gpu() -> None:
    g = gathered()
    for r, uuid in (("0", "GPU-a"), ("1", "GPU-a"), ("2", "GPU-a"), ("3", "GPU-b")):
        g["arrived"][r]["gpu"] = 0
        g["arrived"][r]["gpu_uuid"] = uuid
    (share,) = by_id(judge(g), "cluster-gpu-share")
    # ranks 0 and 1 are on node0; rank 2 has the same UUID but on another host: not shared.
    assert share.status is Status.FAIL and share.title == "Ranks share a GPU: node 0 (node0, ranks 0-1) share GPU-a"
    g["arrived"]["1"]["gpu_uuid"] = "GPU-c"
    assert by_id(judge(g), "cluster-gpu-share")[0].status is Status.OK


def test_a_rank_missing_because_the_job_was_stopped_says_stopped_early() -> None:
    info = {"world_size": 4, "local_world_size": 2, "launcher": "torchrun", "master_addr": "127.0.0.1",
            "master_port": 29500}
    reports = {str(r): _report() for r in range(4)}
    why = "SIGTERM received (the launcher stops every rank when one of them exits with an error)"
    readings = cluster_readings(gathered(missing=(3,)), reports, info, ClusterOptions(init_timeout=30), why)
    (found,) = by_id(diagnose(Facts(readings), cc.CHECKS), "cluster-rendezvous")
    assert found.title.startswith("Stopped early: SIGTERM") and "never arrived" not in found.title


def test_a_huge_world_with_one_rank_is_one_summary_not_a_row_per_rank() -> None:
    # issue 26: WORLD_SIZE=100000 with one rank started printed 100,012 lines (a row per rank)
    world = 100_000
    local = Report(facts=node_facts(), findings=())
    g = {"arrived": {"0": {"rank": 0, "host": "node0", "node_rank": 0, "local_rank": 0, "gpu": None}},
         "decision": {"go": False, "backend": "gloo", "missing": list(range(1, world)), "sizes": [1 << 16],
                      "iters": 5, "arrival_seconds": 5.0},
         "collective": {"finished": {}, "progress": {}, "seconds": 0.0, "stopped": None}}
    info = {"world_size": world, "local_world_size": 1, "launcher": "env", "master_addr": "127.0.0.1",
            "master_port": 1, "rank": 0}
    report, cluster = build_report(g, local, info, ClusterOptions(init_timeout=5))
    table = cluster["table"]
    assert [r["rank"] for r in table["rows"]] == list(range(17))
    assert table["absent"] == {"count": world - 17, "ranks": "17-99999", "state": "never arrived"}
    (rv,) = [f for f in report.findings if f.id == "cluster-rendezvous"]
    assert rv.title == "99999 of 100000 rank(s) never arrived within 5 s: ranks 1-99999"
    assert rv.detail.count("rank ") <= cc.NAMED + 1 and "and 99,983 more" in rv.detail


def test_absent_ranks_between_the_ones_that_came_are_ranges() -> None:
    from envdoctor.pipeline.cluster import _table_ranks

    ranks, absent = _table_ranks(40, {"0", "20", "35", "junk", "99"})
    assert ranks == [*range(17), 20, 35]
    assert absent == {"count": 21, "ranks": "17-19, 21-34, 36-39", "state": "never arrived"}
    assert _table_ranks(4, {"0", "1"}) == ([0, 1, 2, 3], None)  # a small job keeps a row per rank
