"""The benchmark itself: a validated request, the prompt's tokens, and the runner that plans, warms up and measures."""
