"""pytest plugin of seal: run a suite, or single commands, sealed (see docs/pytest.md)."""

from .plugin import Sealed, SealedResult, find_seal

__all__ = ["Sealed", "SealedResult", "find_seal"]
