#!/bin/sh
# Slurm Prolog: refuse this node to the job when envdoctor finds it unhealthy (README.md, "Slurm").
# slurm.conf:  Prolog=/etc/slurm/envdoctor-prolog.sh
# Slurm's contract (slurm.conf(5), "PROLOG AND EPILOG SCRIPTS"): a Prolog that exits non-zero sets the
# node to DRAIN and requeues the job (held, unless SchedulerParameters=nohold_on_prolog_fail).
# envdoctor drains first, with its own reason ("envdoctor: CHECK: CAUSE"), so the HealthCheckProgram
# resumes the node once it is healthy. When envdoctor could not judge (exit 3) the job runs: a node is
# never refused because envdoctor could not look.
PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}
export PATH
line=$("${ENVDOCTOR:-envdoctor}" healthcheck --slurm --max-seconds "${ENVDOCTOR_MAX_SECONDS:-20}" 2>&1)
rc=$?
printf '%s prolog job %s exit %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${SLURM_JOB_ID:-?}" "$rc" "$line" \
  >> "${ENVDOCTOR_SLURM_LOG:-/var/log/envdoctor-slurm.log}" 2>/dev/null
# Refused only for envdoctor's own "unhealthy" answer: any other exit 1 (a crash) never holds a job.
if [ "$rc" -eq 1 ] && printf '%s\n' "$line" | grep -q '^unhealthy '; then
  exit 1
fi
exit 0
