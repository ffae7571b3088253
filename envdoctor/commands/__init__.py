"""The command line: each command is options -> Plan -> pipeline -> renderer -> exit code."""
