"""reasonvqa-pipeline: shared plumbing (schemas, stage contract, config, CLI)."""

__version__ = "0.1.0"
