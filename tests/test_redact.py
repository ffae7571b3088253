"""Secrets never reach a report: allow-list, secret names, credential-shaped values."""

from __future__ import annotations

import json

from envdoctor.model import Facts, ok
from envdoctor.redact import REDACTED, redact_text, select_env
from envdoctor.report import Report, to_json


def test_only_allow_listed_variables_are_collected():
    env = select_env({"HOME": "/root", "SSH_AUTH_SOCK": "/tmp/x", "CUDA_HOME": "/usr/local/cuda",
                      "OPENAI_API_KEY": "sk-abc", "NCCL_DEBUG": "WARN", "LD_LIBRARY_PATH": "/opt/lib"})
    assert env == {"CUDA_HOME": "/usr/local/cuda", "NCCL_DEBUG": "WARN", "LD_LIBRARY_PATH": "/opt/lib"}


def test_secret_names_inside_the_allow_list_are_redacted():
    env = select_env({"HF_TOKEN": "hf_x", "NVIDIA_API_KEY": "nvapi-123", "TORCH_HOME": "/cache",
                      "NCCL_IB_AUTH": "x"})
    assert env["HF_TOKEN"] == REDACTED and env["NVIDIA_API_KEY"] == REDACTED and env["NCCL_IB_AUTH"] == REDACTED
    assert env["TORCH_HOME"] == "/cache"


def test_credential_shaped_values_are_masked_anywhere():
    text = ("PIP_INDEX_URL=https://user:s3cr3t@pypi.example.org/simple token hf_abcdefghijklmnopqrstuvwx "
            "ghp_abcdefghijklmnopqrstuvwxyz012345 AKIAABCDEFGHIJKLMNOP")
    out = redact_text(text)
    for secret in ("s3cr3t", "hf_abcdefghijklmnopqrstuvwx", "ghp_abcdefghijklmnopqrstuvwxyz012345",
                   "AKIAABCDEFGHIJKLMNOP"):
        assert secret not in out
    assert "https://<redacted>@pypi.example.org/simple" in out


def test_a_written_report_is_redacted_even_if_a_probe_leaked_a_secret():
    facts = Facts({"env.vars": ok({"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz"}),
                   "torch.cuda_available_messages": ok(["fetch https://bob:hunter2@host/x failed"])})
    text = to_json(Report(facts=facts, findings=()))
    assert "hunter2" not in text and "hf_abcdefghijklmnopqrstuvwxyz" not in text
    assert json.loads(text)["facts"]["env.vars"]["value"]["HF_TOKEN"] == REDACTED


def test_redaction_stays_fast_on_long_strings():
    import time

    began = time.monotonic()
    for text in ("a" * 200_000, "http:" * 40_000, "x://" + "u" * 100_000, "a:b" * 60_000):
        redact_text(text)
    assert time.monotonic() - began < 2.0
    assert redact_text("see https://me:pw@host/x and " + "y" * 50_000).startswith("see https://<redacted>@host/x")
