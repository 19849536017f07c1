"""``halfway.llm``: text generation with decoder LLMs from transformers checkpoint folders or
decoder ONNX exports with a past/present cache, on numpy or OpenCL, with a key/value cache per
layer written in place on the device.

    lm = halfway.llm.load("path/to/checkpoint", place="cpu", dtype="float32", max_length=512)
    ids = lm.generate([[1, 306, 4966]], max_new_tokens=32)            # greedy, stops at eos
    ids = lm.generate(prompts, max_new_tokens=32, do_sample=True, temperature=0.8, top_p=0.9, seed=0)
    for tokens in lm.stream(prompts, max_new_tokens=32): ...           # one [batch] array per step
    text = lm.generate_text("Once upon a time", max_new_tokens=32)     # with the folder's tokenizer.json

``prefill``, ``decode`` and ``logits`` are the steps for loops of one's own.
"""

from .model import GenerationStats, LanguageModel, load
from .prompts import LengthError
from .sampling import Sampling
from .text import Tokenizer

__all__ = ["load", "LanguageModel", "GenerationStats", "Sampling", "Tokenizer", "LengthError"]
