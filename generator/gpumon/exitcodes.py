"""The exit codes of every ``gpumon`` command, in one place (README "Exit codes", the ``--help``
epilogs, :func:`gpumon.validate.exit_code`). Imports nothing, so the CLI can load it before
``--help`` without pulling in the library."""

from __future__ import annotations

#: all good: no drift, no lint errors, every validate check passed (warnings and info do not fail)
EXIT_OK = 0
#: findings: drift, lint errors, a failed validate check, a semantic diff
EXIT_FINDINGS = 1
#: could not do the job: usage, spec/config, connection, auth, not a Prometheus API
EXIT_ERROR = 2
#: (validate, preview) inconclusive: partial responses or failed queries, and nothing failed
EXIT_INCONCLUSIVE = 3
#: internal error: an uncaught exception, a bug in gpumon (:func:`gpumon.cli.common.internal_error`)
EXIT_INTERNAL = 4
#: stdout's reader went away first (``gpumon lint --list-checks | head -1``): 128 + SIGPIPE, as a
#: shell reports a command that SIGPIPE ended; not an error of gpumon's
EXIT_SIGPIPE = 141
