"""Running the repro: spawn, capture, kill, classify. The only place aoti_bisect starts the repro's processes."""
