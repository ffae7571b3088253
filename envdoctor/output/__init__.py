"""Presentation only: the terminal, Markdown and healthcheck views of a report, the cluster and fleet tables."""
