#!/bin/sh
# Slurm Epilog: after each job, drain this node if the job left it unhealthy (README.md, "Slurm").
# slurm.conf:  Epilog=/etc/slurm/envdoctor-epilog.sh
# It always exits 0: an Epilog that exits non-zero makes Slurm drain the node with its own reason
# (slurm.conf(5)), which the HealthCheckProgram would not own and so never resume; envdoctor drains
# with "envdoctor: CHECK: CAUSE" instead.
PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}
export PATH
line=$("${ENVDOCTOR:-envdoctor}" healthcheck --slurm --max-seconds "${ENVDOCTOR_MAX_SECONDS:-20}" 2>&1)
rc=$?
printf '%s epilog job %s exit %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${SLURM_JOB_ID:-?}" "$rc" "$line" \
  >> "${ENVDOCTOR_SLURM_LOG:-/var/log/envdoctor-slurm.log}" 2>/dev/null
exit 0
