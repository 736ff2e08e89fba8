"""Storing a complete turn in one transaction, and what it teaches the token counts."""
