"""Thin Lambda entry points: parse the event, call the domain, shape the reply."""
