"""Pure data, statistics and arithmetic: the benchmark's results, lengths and budgets, fitted curves. No torch."""
