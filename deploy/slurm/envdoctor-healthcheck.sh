#!/bin/sh
# Slurm HealthCheckProgram: drain this node when envdoctor finds it unhealthy, resume it when envdoctor
# drained it and it is healthy again (README.md, "Slurm"). slurm.conf:
#   HealthCheckProgram=/etc/slurm/envdoctor-healthcheck.sh
# slurmd runs it as root with no PATH and only SLURMD_NODENAME set, ignores its exit code and output,
# and kills it after 60 s (slurm.conf(5)); envdoctor --slurm answers within 55 s whatever hangs.
PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}
export PATH
line=$("${ENVDOCTOR:-envdoctor}" healthcheck --slurm --max-seconds "${ENVDOCTOR_MAX_SECONDS:-20}" 2>&1)
rc=$?
# One line per run (exit 0 healthy, 1 unhealthy: drained or left drained, 3 could not judge: untouched).
printf '%s healthcheck exit %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$rc" "$line" \
  >> "${ENVDOCTOR_SLURM_LOG:-/var/log/envdoctor-slurm.log}" 2>/dev/null
exit "$rc"
