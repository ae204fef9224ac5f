"""Bundled sample inputs and knowledge (package data, read through ``reasonvqa.paths``)."""
