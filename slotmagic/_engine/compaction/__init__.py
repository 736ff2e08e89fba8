"""Compacting a slot: the fold and its summary, recovering from a provider's overflow once,
and a reviewed summary kept as a draft."""
