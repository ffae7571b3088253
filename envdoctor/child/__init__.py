"""Stdlib-only scripts run in the *target* interpreter, in a child process with a deadline.

Each script is run by path (``python envdoctor/child/<name>.py '<json args>'``), must not import
envdoctor or anything outside the standard library at module level, and reports through
``_edchild``: records on stdout behind a marker, ``stage()`` before each risky step, ``done()``
last. A script that hangs or dies still leaves the records it printed.
"""
