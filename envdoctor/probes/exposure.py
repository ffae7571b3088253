"""Probe what this machine exposes: Jupyter, TensorBoard and sshd listening sockets (psutil), whether
each listens on every interface, and whether a Jupyter server was started without a token or password
(its command line, else its config file). Reads only: no connection is made to any socket.

No command line is kept: it can carry a token. Only what was concluded from it (the flag's name,
never its value) goes into the facts.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from envdoctor.process.host import Host

from ..model import Reading, Reason, missing, ok
from .spec import Options, ProbeSpec

KEYS = ("exposure.services",)
SOURCE = "psutil.net_connections"

#: Addresses that accept connections on every interface (IPv4, IPv6, and IPv4-mapped IPv6).
ALL_INTERFACES = frozenset({"0.0.0.0", "::", "", "::ffff:0.0.0.0", "*"})

_JUPYTER_SCRIPT = re.compile(r"^jupyter(-lab|-notebook|-server|-nbclassic)?(\.exe)?$")
_JUPYTER_MODULES = frozenset({"jupyter", "jupyterlab", "notebook", "jupyter_server", "nbclassic"})
_JUPYTER_SUBCOMMANDS = frozenset({"lab", "notebook", "server", "nbclassic"})
#: Traits that hold a Jupyter server's token / password (classic Notebook, Jupyter Server 1 and 2).
_TOKEN_TRAITS = ("NotebookApp.token", "ServerApp.token", "IdentityProvider.token")
_PASSWORD_TRAITS = ("NotebookApp.password", "ServerApp.password", "PasswordIdentityProvider.hashed_password")
_CONFIG_NAMES = ("jupyter_server_config", "jupyter_notebook_config", "jupyter_lab_config")


def _program(cmdline: Sequence[str]) -> tuple[str, str, str]:
    """(program, its first argument, module) of a command line: an interpreter running a script counts as
    the script (``python /usr/local/bin/jupyter-lab``), ``python -m X`` as module X."""
    first = os.path.basename(cmdline[0])
    if not re.match(r"^python[0-9.]*(\.exe)?$", first):
        return first, cmdline[1] if len(cmdline) > 1 else "", ""
    rest = list(cmdline[1:])
    while rest and rest[0].startswith("-") and rest[0] != "-m":
        rest.pop(0)  # interpreter flags: -u, -X dev, -O
    if len(rest) >= 2 and rest[0] == "-m":
        return "", "", rest[1].split(".")[0]
    return (os.path.basename(rest[0]), rest[1] if len(rest) > 1 else "", "") if rest else ("", "", "")


def service_of(cmdline: Sequence[str]) -> str | None:
    """``jupyter``, ``tensorboard`` or ``sshd`` for a process command line, else None. Judged by the
    program only: ``python train.py --log tensorboard`` is not TensorBoard."""
    if not cmdline:
        return None
    if cmdline[0].startswith("sshd:"):  # sshd renames its processes: "sshd: /usr/sbin/sshd -D [listener] …"
        return "sshd"
    program, arg, module = _program(cmdline)
    if module in _JUPYTER_MODULES or (_JUPYTER_SCRIPT.match(program) and (program != "jupyter"
                                                                          or arg in _JUPYTER_SUBCOMMANDS)):
        return "jupyter"
    if module == "tensorboard" or program in ("tensorboard", "tensorboard.exe"):
        return "tensorboard"
    if program == "sshd":
        return "sshd"
    return None


def _unquoted(value: str) -> str:
    value = value.strip()
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value


def _flag(cmdline: Sequence[str], traits: Sequence[str]) -> tuple[str, str] | None:
    """(flag name, value) of the last ``--Trait=value`` / ``--Trait value`` on the command line."""
    found = None
    for i, arg in enumerate(cmdline):
        for trait in traits:
            if arg == f"--{trait}" and i + 1 < len(cmdline):
                found = (f"--{trait}", _unquoted(cmdline[i + 1]))
            elif arg.startswith(f"--{trait}="):
                found = (f"--{trait}", _unquoted(arg.split("=", 1)[1]))
    return found


def _config_files(host: Host, cmdline: Sequence[str], uid: int | None) -> list[str]:
    explicit = [arg.split("=", 1)[1] for arg in cmdline if arg.startswith("--config=")]
    if explicit:
        return explicit
    home = None
    if uid is not None:
        try:
            import pwd

            home = pwd.getpwuid(uid).pw_dir
        except (ImportError, KeyError):
            home = None
    dirs = [d for d in (host.getenv("JUPYTER_CONFIG_DIR") if uid == _euid() else None,
                        f"{home}/.jupyter" if home else None) if d]
    return [f"{d}/{name}.{ext}" for d in dirs for name in _CONFIG_NAMES for ext in ("json", "py")]


def _euid() -> int | None:
    return os.geteuid() if hasattr(os, "geteuid") else None


def _from_config(text: str, path: str) -> tuple[str | None, str | None]:
    """(token, password) a Jupyter config file sets: a value, ``""`` (set empty), or None (not set)."""
    token = password = None
    if path.endswith(".json"):
        try:
            data = json.loads(text)
        except ValueError:
            return None, None
        for trait in _TOKEN_TRAITS:
            cls, name = trait.split(".")
            value = (data.get(cls) or {}).get(name) if isinstance(data, dict) else None
            token = str(value) if value is not None else token
        for trait in _PASSWORD_TRAITS:
            cls, name = trait.split(".")
            value = (data.get(cls) or {}).get(name) if isinstance(data, dict) else None
            password = str(value) if value is not None else password
        return token, password
    for trait in _TOKEN_TRAITS:
        for m in re.finditer(rf"^\s*c\.{re.escape(trait)}\s*=\s*u?(['\"])(.*?)\1", text, re.MULTILINE):
            token = m.group(2)
    for trait in _PASSWORD_TRAITS:
        for m in re.finditer(rf"^\s*c\.{re.escape(trait)}\s*=\s*u?(['\"])(.*?)\1", text, re.MULTILINE):
            password = m.group(2)
    return token, password


def jupyter_auth(host: Host, cmdline: Sequence[str], uid: int | None) -> tuple[str, str]:
    """How a Jupyter server authenticates and where that was read: ``none`` (token and password empty),
    ``token``, ``password``, or ``default-token`` (nothing set: Jupyter makes a random token)."""
    token_flag, password_flag = _flag(cmdline, _TOKEN_TRAITS), _flag(cmdline, _PASSWORD_TRAITS)
    token = token_flag[1] if token_flag else None
    password = password_flag[1] if password_flag else None
    where = ", ".join(f"{'an empty' if not f[1] else 'a'} {f[0]} on its command line"
                      for f in (token_flag, password_flag) if f)
    if token is None or password is None:
        for path in _config_files(host, cmdline, uid):
            text, _, _ = host.read_text(path, 1 << 20)
            if text is None:
                continue
            cfg_token, cfg_password = _from_config(text, path)
            if cfg_token is not None and token is None:
                token = cfg_token
                where = ", ".join(filter(None, (where, f"token {'empty' if not cfg_token else 'set'} in {path}")))
            if cfg_password is not None and password is None:
                password = cfg_password
                where = ", ".join(filter(None, (where, f"password {'empty' if not cfg_password else 'set'} in {path}")))
    if password:
        return "password", where
    if token:
        return "token", where
    if token == "":
        return "none", where
    return "default-token", where or "no token or password set: Jupyter generates a random token"


def services(host: Host) -> Reading:
    found = host.listeners()
    if isinstance(found, str):
        return missing(Reason.UNSUPPORTED if "re-rooted" in found else Reason.DENIED, SOURCE, found)
    by_pid: dict[Any, dict[str, Any]] = {}
    for sock in found:
        service = service_of(sock.get("cmdline") or ())
        if service is None:
            continue
        entry = by_pid.setdefault(sock["pid"], {"service": service, "pid": sock["pid"], "uid": sock.get("uid"),
                                                "listen": [], "all_interfaces": False, "auth": None,
                                                "auth_from": None, "_cmdline": sock.get("cmdline") or ()})
        pair = {"address": sock["address"], "port": sock["port"]}
        if pair not in entry["listen"]:
            entry["listen"].append(pair)
        entry["all_interfaces"] = entry["all_interfaces"] or sock["address"] in ALL_INTERFACES
    out = []
    for entry in by_pid.values():
        cmdline = entry.pop("_cmdline")
        if entry["service"] == "jupyter":
            entry["auth"], entry["auth_from"] = jupyter_auth(host, cmdline, entry["uid"])
        entry["listen"].sort(key=lambda p: (p["port"], p["address"]))
        out.append(entry)
    out.sort(key=lambda e: (e["service"], min(p["port"] for p in e["listen"])))
    return ok(out, SOURCE)


def probe_exposure(host: Host, options: Options) -> dict[str, Reading]:
    return {"exposure.services": services(host)}


PROBES = [ProbeSpec("exposure", probe_exposure, KEYS, scale=1.0)]
