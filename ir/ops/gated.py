"""Schemas of the gated linear units: swiglu, LLaMA's MLP gate ``silu(gate) * up`` as one op.

swiglu follows its inputs' dtype under the float16 transpile (FOLLOW): its kernels compute in
float32 and it is elementwise.
"""

from __future__ import annotations

from ..schema import InferContext, OpSchema, Slot, register_op

__all__: list[str] = []


def _infer_swiglu(ctx: InferContext) -> None:
    gate, up = ctx.input("X"), ctx.input("Y")
    ctx.check(len(gate.shape) == len(up.shape) and all(a == b or min(a, b) < 0 for a, b in zip(gate.shape, up.shape))
              and gate.dtype is up.dtype,
              f"Y {up.dtype.name} {list(up.shape)} must have X's shape and dtype ({gate.dtype.name} {list(gate.shape)})")
    ctx.set_output("Out", tuple(a if a >= 0 else b for a, b in zip(gate.shape, up.shape)), gate.dtype)


register_op(OpSchema(
    "swiglu", inputs=[Slot("X"), Slot("Y")], outputs=[Slot("Out")], infer=_infer_swiglu,
    dtype_slots=("X", "Y"), inplace={"X": "Out"},
    doc="Out = silu(X) * Y = X * sigmoid(X) * Y: the gate X and the up projection Y of a SwiGLU MLP (LLaMA, "
        "Mistral, Qwen), of one shape, in one pass over memory.",
))
