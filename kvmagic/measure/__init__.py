"""Measuring on a device: accelerator sync and memory, the timed and hooked runs, KV bytes, cache strategies, probes."""
