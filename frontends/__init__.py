"""Model importers: ONNX and Paddle inference models."""
