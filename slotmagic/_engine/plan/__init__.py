"""A turn before it is sent: its checked options, the cell it comes from (append, replay or
fork), where a fan-out goes, the tools it offers and its reply's limit."""
