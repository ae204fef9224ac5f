"""Scoring predictions on a release with the papers' metrics (``reasonvqa evaluate``); see docs/evaluation.md."""
