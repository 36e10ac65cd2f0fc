"""A trained model in other runtimes' formats (CTranslate2, Hugging Face
transformers with its model card) and checkpoint averaging (``nmt average``,
``decode.average_last``)."""
