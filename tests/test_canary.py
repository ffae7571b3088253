"""Canary secrets planted where envdoctor reads (secret-named variables, token-shaped entries of
allow-listed paths, URL credentials, key=value secrets, a JWT, the working directory, an import
error that quotes a proxy password and a token, a saved report and a paste full of them) and
looked for in every output format of every command: terminal, -v, JSON, Markdown, -o files,
the healthcheck line, stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .faults import (
    AT_SLASH,
    AWS,
    GH,
    HF,
    HF_API,
    JWT,
    PROXY_PASSWORD,
    SK,
    TF_VAR,
    URL_USER,
    canary_env,
    fake_torch,
    leaked,
    run_cli,
)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, object]:
    root = tmp_path_factory.mktemp(f"home-{GH}")
    cwd = root / f"work-{SK}"
    cwd.mkdir()
    report = root / f"report-{HF}.json"
    report.write_text(json.dumps({"schema_version": 1, "facts": {
        "torch.version": {"value": None, "reason": "failed",
                          "detail": f"ImportError: https://alice:{PROXY_PASSWORD}@proxy:3128 token {HF} "
                                    f"https://{URL_USER}@hf.example/m https://bob:{AT_SLASH}@proxy.corp:3128"},
        "python.executable": {"value": f"/home/a/{GH}/bin/python", "source": f"/x/{AWS}"},
        "env.vars": {"value": {"LD_LIBRARY_PATH": f"/x/{AWS}:https://bob:{AT_SLASH}@p.example/l", "HF_TOKEN": HF,
                               "TORCH_HOME": f"/t/{JWT}", "TF_VAR_db_pass": TF_VAR, "HF_API": HF_API,
                               "NVIDIA_API_KEY": f"nvapi-{TF_VAR}", "HF_ENDPOINT": f"https://{URL_USER}@hf.example"}},
        "nvml.gpus": {"value": [{"index": 0, "name": f"GPU {SK}", "uuid": f"GPU-{GH}"}]}}}))
    paste = root / "paste.txt"
    paste.write_text(f"PyTorch version: 2.6.0+cu126\nCUDA used to build PyTorch: 12.6\nPython platform: Linux /home/{GH}\n"
                     f"OSError: https://u:{PROXY_PASSWORD}@h/ {SK} api_key={AWS}\n"
                     f"ImportError: libcudart.so.12: cannot open shared object file /opt/{JWT}/lib\n")
    env = canary_env()
    healthy = fake_torch(root, "healthy")
    broken = fake_torch(root, "secret-in-error")
    return {"root": root, "cwd": str(cwd), "report": str(report), "paste": str(paste), "env": env,
            "healthy": str(healthy), "broken": str(broken)}


COMMANDS = [
    ("check", ["check", "--no-micro"], "broken"),
    ("check -v", ["check", "--no-micro", "-v"], "broken"),
    ("check -v healthy", ["check", "--no-micro", "-v"], "healthy"),
    ("report --json", ["report", "--no-micro"], "broken"),
    ("report --markdown", ["report", "--no-micro", "--markdown"], "healthy"),
    ("report -o", ["report", "--no-micro", "-o", "{root}/out-{GH}.json"], "broken"),
    ("report --markdown -o", ["report", "--no-micro", "--markdown", "-o", "{root}/out-{GH}.md"], "broken"),
    ("diagnose report", ["diagnose", "{report}"], None),
    ("diagnose report -v", ["diagnose", "{report}", "-v"], None),
    ("diagnose report --json", ["diagnose", "{report}", "--json"], None),
    ("diagnose report --markdown", ["diagnose", "{report}", "--markdown"], None),
    ("diagnose paste -v", ["diagnose", "{paste}", "-v"], None),
    ("diagnose paste --json", ["diagnose", "{paste}", "--json"], None),
    ("diagnose paste --markdown", ["diagnose", "{paste}", "--markdown"], None),
    ("diagnose missing file", ["diagnose", "{root}/missing-{HF}.json"], None),
    ("healthcheck", ["healthcheck", "--max-seconds", "4"], "broken"),
    ("list", ["list"], None),
    ("list --json", ["list", "--json"], None),
    ("bad --python", ["check", "--python", "/opt/{GH}/python"], None),
    ("diff", ["diff", "{report}", "{paste}"], None),
    ("diff --json", ["diff", "{report}", "{paste}", "--json"], None),
    ("diff missing file", ["diff", "{root}/missing-{HF}.json", "{paste}"], None),
    ("fleet", ["fleet", "{report}", "{paste}"], None),
    ("fleet --json", ["fleet", "{report}", "{paste}", "--json"], None),
]


@pytest.mark.parametrize("name, args, torch", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_no_canary_in_any_output(world, name, args, torch):
    fill = {k: str(v) for k, v in world.items() if isinstance(v, (str, Path))} | {"GH": GH, "HF": HF}
    argv = [a.format(**fill) for a in args]
    env = dict(world["env"])
    if torch:
        env["PYTHONPATH"] = f"{world[torch]}:/opt/{GH}/site"
    out = run_cli(argv, env=env, cwd=world["cwd"], timeout=60)
    assert "Traceback" not in out.text, out.text
    assert out.rc in (0, 1, 2, 3), out.text
    texts = [out.text]
    for arg in argv:
        if arg.startswith(str(world["root"]) + "/out-") and Path(arg).exists():
            texts.append(Path(arg).read_text())
    found = leaked("\n".join(texts).replace("\n", ""))
    assert not found, (found, out.text[:3000])
    if torch == "broken" and name != "healthcheck":
        assert "<redacted>" in "".join(texts)  # the secrets were there, and masked


def test_no_canary_in_the_distributed_json(world, tmp_path):
    """`check --distributed --json` on one rank (a launcher's variables, the real torch, Gloo on
    127.0.0.1): rank 0's cluster report shows no planted secret, and the variables are masked."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(world["env"], RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port))
    out = run_cli(["check", "--distributed", "--json", "--no-micro", "-o", str(tmp_path / f"c-{GH}.json")], env=env,
                  cwd=world["cwd"], timeout=120)
    assert "Traceback" not in out.text and out.rc in (0, 1, 3), out.text[-2000:]
    written = (tmp_path / f"c-{GH}.json").read_text()
    assert json.loads(out.stdout)["cluster"] and b'"HF_API": "<redacted>"' in out.stdout
    assert not leaked(out.text + written), leaked(out.text + written)
