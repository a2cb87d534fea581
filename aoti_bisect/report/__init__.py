"""The report: its JSON model (which owns the exit code), Markdown rendering, redaction, the ticket bundle."""
