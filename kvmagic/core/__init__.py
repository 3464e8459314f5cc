"""Pure data, statistics and arithmetic: the benchmark's results, lengths and budgets, the cost model. No torch."""
