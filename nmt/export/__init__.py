"""A trained model in other runtimes' formats (CTranslate2, Hugging Face
transformers with its model card, ONNX with a decoding loop) and checkpoint
averaging (``nmt average``, ``decode.average_last``)."""

from __future__ import annotations

from pathlib import Path


def export_model(
    checkpoint: Path,
    out: Path,
    format: str,
    quantization: str = "float32",
    license: str = "unknown",
) -> Path:
    """``nmt export``: the directory of ``format`` (``hf``, ``onnx`` or
    ``ctranslate2``), its options checked against the format; each format's module is
    imported only here."""
    from nmt.errors import NmtError

    if format == "onnx":
        from nmt.export.onnx import export_onnx

        if quantization != "float32" or license != "unknown":
            raise NmtError("--quantization and --license: the onnx format takes neither")
        return export_onnx(checkpoint, out)
    if format == "hf":
        from nmt.export.huggingface import export_hf

        if quantization != "float32":
            raise NmtError(f"--quantization {quantization}: the hf format writes float32")
        return export_hf(checkpoint, out, license)[0]
    if format != "ctranslate2":
        raise NmtError(f"--format {format}: expected ctranslate2, hf or onnx")
    if license != "unknown":
        raise NmtError("--license: only --format hf writes a model card")
    from nmt.export.ctranslate2 import export_ctranslate2

    return export_ctranslate2(checkpoint, out, quantization)
