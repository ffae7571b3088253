"""Whether a paste's output came from inside a container (Docker, Kubernetes, Podman): one home for the evidence,
read by ``parse_text`` (``host.container``) and by the signature table (a DataLoader worker that died in a container
started without ``--shm-size``). It imports no other parser, so both can use it."""

from __future__ import annotations

import re

from ..lazyre import lazy_re

__all__ = ["CONTAINER_CMD_RE", "NGC_NO_DRIVER", "RUNTIME_HOOK", "container_evidence"]

#: The prefix of every error libnvidia-container's CLI prints (the runtime hook Docker runs on the host).
RUNTIME_HOOK = "nvidia-container-cli:"
#: The start-up banner of NVIDIA's container images when the container got no driver.
NGC_NO_DRIVER = "The NVIDIA Driver was not detected"

# A shell prompt whose host name is 12 hex digits: Docker names a container's host after the
# first 12 hex digits of its id (root@098b49afe624:/#), so the paste came from inside one.
_DOCKER_PROMPT_RE = lazy_re(r"^(?:\([^)]*\)\s*)?[\w.-]+@([0-9a-f]{12})[:\s]")


# A command whose output is a container's: `kubectl logs|exec`, `docker|podman|nvidia-docker run|exec`.
CONTAINER_CMD_RE = lazy_re(r"^(?:\S*[$#>]\s*)?(?:sudo\s+)?(kubectl|oc|docker|podman|nvidia-docker)\s+"
                            r"(?:-\S+\s+)*(logs|exec|run|compose\s+(?:run|exec|logs|up))\b")
# docker compose prefixes each service's output: "qna-transformers_1  | …" (v1) / "web-1  | …" (v2).
_COMPOSE_LOG_RE = lazy_re(r"^[a-z0-9][\w.-]*[-_]\d+\s+\|\s")
# docker compose v1 announcing a one-off container: "Creating vqgan-clip-docker_generate_run ... done"
_COMPOSE_RUN_RE = lazy_re(r"^(?:Creating|Starting) \S+_run(?:_\w+)? \.\.\. done")
_CUDA_IMAGE_RE = lazy_re(r"\bnvidia/cuda:\d+\.\d+[\w.-]*")
_KUBEFLOW_RE = lazy_re(r"\bKubeflow\b", re.IGNORECASE)
_REPORT_LINE_RE = lazy_re(r"NVIDIA-SMI|Failed to initialize NVML|^PyTorch version|^GPU \d+:|RuntimeError|UserWarning")


def container_evidence(lines: list[str]) -> tuple[str, str] | None:
    """("docker"|"kubernetes"|"podman", why) when the paste shows its output came from inside a container:
    a Docker-id shell prompt, docker compose log prefixes on the report's lines, or a container
    command (kubectl logs, docker run …) before the first report line."""
    if prompt := next((m for line in lines if (m := _DOCKER_PROMPT_RE.match(line))), None):
        return "docker", f"the shell prompt's host name {prompt.group(1)} is a Docker container id"
    if any(NGC_NO_DRIVER in line for line in lines):
        return "docker", f"the start-up banner of an NVIDIA container image (\"{NGC_NO_DRIVER}\")"
    if image := next((m for line in lines if "nvidia/cuda:" in line and (m := _CUDA_IMAGE_RE.search(line))), None):
        if any("container" in line.lower() for line in lines):
            # "I built a container using image nvidia/cuda:11.7.1-cudnn8-runtime-ubuntu22.04": NVIDIA's CUDA image,
            # run as a container, is where the text's output came from.
            return "docker", f"the text runs a container of NVIDIA's CUDA image {image.group(0)}"
    if kubeflow := next((line for line in lines if "ubeflow" in line and _KUBEFLOW_RE.search(line)), None):
        # Kubeflow (Pipelines, Training Operator, Notebooks) runs every step, job and notebook as a Kubernetes pod.
        return "kubernetes", f"the text names Kubeflow, whose steps run as Kubernetes pods: {kubeflow.strip()[:80]!r}"
    if any(line.startswith("Server Version: version.Info{") for line in lines):
        # `kubectl version` answered by a cluster: the workload in the ticket runs in its pods.
        return "kubernetes", "`kubectl version` output names the cluster's server version"
    for line in lines:
        if _REPORT_LINE_RE.search(line):
            if _COMPOSE_LOG_RE.match(line):
                return "docker", f"the report's lines carry docker compose's service prefix ({line.split('|')[0].strip()})"
            return None  # the first report line came before any container command: the host's
        if _COMPOSE_RUN_RE.match(line.strip()):
            return "docker", f"docker compose started the command: `{line.strip()[:80]}`"
        if m := CONTAINER_CMD_RE.match(line.strip()):
            kind = {"kubectl": "kubernetes", "oc": "kubernetes", "podman": "podman"}.get(m.group(1), "docker")
            return kind, f"the output follows `{line.strip()[:80]}`, a command that runs in a container"
    return None
