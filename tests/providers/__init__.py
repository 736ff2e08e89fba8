"""Providers over HTTP, tested against a scripted local server."""
