"""Secrets never reach a report: allow-list, secret names, credential-shaped values."""

from __future__ import annotations

import json

import pytest

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
    assert env["TORCH_HOME"] == REDACTED  # reported by name; its value is not one envdoctor judges


def test_only_the_values_of_judged_variables_are_shown():
    env = select_env({"TF_VAR_db_pass": "plainvalue", "HF_API": "plainvalue2", "CUDA_VISIBLE_DEVICES": "0,1",
                      "NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0", "TORCH_NCCL_BLOCKING_WAIT": "1",
                      "LD_LIBRARY_PATH": "/usr/lib:https://tok@h.example/x", "NCCL_IB_GID_INDEX": "3",
                      "HOME": "/root"})
    assert env == {"TF_VAR_db_pass": REDACTED, "HF_API": REDACTED, "CUDA_VISIBLE_DEVICES": "0,1",
                   "NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0", "TORCH_NCCL_BLOCKING_WAIT": "1",
                   "LD_LIBRARY_PATH": "/usr/lib:https://<redacted>@h.example/x", "NCCL_IB_GID_INDEX": REDACTED}


def test_a_saved_reports_environment_is_masked_by_the_same_list():
    from envdoctor.model import Facts, ok
    from envdoctor.report import Report

    facts = Facts({"env.vars": ok({"HF_API": "plainvalue", "NVIDIA_API_KEY": "nvapi-x", "CUDA_VISIBLE_DEVICES": "1"})})
    shown = Report(facts=facts, findings=()).facts.value("env.vars")
    assert dict(shown) == {"HF_API": REDACTED, "NVIDIA_API_KEY": REDACTED, "CUDA_VISIBLE_DEVICES": "1"}


@pytest.mark.parametrize("url, secret", [
    ("https://TOKEN123abc@hf.example/models", "TOKEN123abc"),
    ("https://bob:Qa1@Zb2@proxy.example:3128", "Qa1@Zb2"),
    ("https://bob:pa/ss@proxy.example:3128/x", "pa/ss"),
    ("http://u:Qa1@Zb2/Xc3@Wd4/Ve5@host.example/path", "Qa1@Zb2/Xc3@Wd4/Ve5"),
    ("https://bob:1234@proxy.example", "1234"),
    ("socks5://:onlypass@proxy.example", "onlypass"),
    ("https://user:12/34@host/", "12/34"),
    ("https://user:8080/abc@proxy.example/x", "8080/abc"),
])
def test_url_user_parts_and_passwords_with_at_and_slash_are_masked(url, secret):
    out = redact_text(f"proxy {url} failed")
    assert not any(piece in out for piece in secret.replace("@", "/").split("/")), out
    assert "<redacted>@" in out


@pytest.mark.parametrize("text", [
    "git+https://github.com/org/repo@v1.2", "https://host.example:8080/path@v1", "https://pypi.org/simple/torch/",
    "pip install 'torch @ https://download.pytorch.org/whl/cu126/torch-2.6.0.whl'", "http://[::1]:8080/x",
])
def test_urls_without_credentials_are_left_alone(text):
    assert redact_text(text) == text


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


# A token glued to a word by "_" (issue 26: redact_text("mlx5_ghp_…") was not masked): no word
# boundary before it, so its issuer's exact length and a random look decide, never a bare prefix.
_GH = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3gHx"  # 36 after the prefix
_HFT = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm1234567x"  # 34 after the prefix


@pytest.mark.parametrize("text, secret", [
    (f"mlx5_{_GH}", _GH), (f"/dev/infiniband/mlx5_{_GH}/port", _GH), (f"run_{_HFT}.log", _HFT),
    (f"eth0_{_GH}_1", _GH), ("KEY_AKIAABCDEFGH12345678", "AKIAABCDEFGH12345678"),
    ("x_github_pat_" + "A1b" * 27 + "x", "github_pat_" + "A1b" * 27 + "x"),
])
def test_a_token_glued_by_underscore_is_masked(text, secret):
    out = redact_text(text)
    assert secret not in out and REDACTED in out


@pytest.mark.parametrize("text", [
    "cls_hf_AutoModelForSequenceClassification",  # 34 letters, CamelCase: an identifier
    "nccl_ghp_x", "torch_hf_hub_download", "MY_AKIAABCDEFGHIJKLMNOP",  # no digit: not an AWS key id
    "model_hf_" + "abcdefghij" * 3 + "abcd",  # 34 lower-case letters: no sign of randomness
    "mlx5_ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3gHx" + "more",  # not GitHub's length
])
def test_ordinary_identifiers_with_a_token_prefix_are_kept(text):
    assert redact_text(text) == text
