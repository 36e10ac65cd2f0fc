"""nmt: a Transformer translation toolkit with pluggable cross-attention.

Installed as the distribution ``nmt-attention`` (PyPI's ``nmt`` is an unrelated
package); imported as ``nmt``, run as the ``nmt`` command."""

__version__ = "0.1.0"
DISTRIBUTION = "nmt-attention"  # pyproject.toml's name: what `pip install` takes


def install_hint(extra: str) -> str:
    """How to install an optional extra: from the package index, or from a clone."""
    return f"pip install '{DISTRIBUTION}[{extra}]' (in a clone: pip install -e '.[{extra}]')"
