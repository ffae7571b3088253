"""One run pipeline: options -> :class:`~.plan.Plan` -> :func:`~.collect.collect` (probes -> Facts) ->
:func:`~.judge.judge` (checks -> the one Report) -> a renderer -> an exit code.

:mod:`.startup` builds the same Plan from ``sys.argv`` before click is imported and starts the
early children from it; :mod:`.fast` is the healthcheck's and ``exec``'s fast path. Nothing is
imported here: the start-up path must stay light.
"""
