"""Loading a causal LM and its tokenizer, and the embedded offline ``tiny`` model."""
