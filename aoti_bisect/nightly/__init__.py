"""`aoti-bisect nightly`, `merge` and `history`: many runs per repro, record files, a SQLite history, judging."""
