"""elastic-audit: forensics for Flyte + PyTorch Elastic attempts that died silently green."""

__version__ = "0.1.0"
TOOL = f"elastic-audit {__version__}"
