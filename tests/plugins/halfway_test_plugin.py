"""A plugin as users write one: a custom op (schema + numpy kernel) and a pass that uses it.

``swap_relu_for_square_relu`` replaces every ``relu`` by ``square_relu`` (relu(x) squared), an op
the plugin defines, so a test can tell from the outputs that the pass ran.
"""

from halfway.ir.schema import OpSchema, Slot, register_op, same_as
from halfway.kernels import register_kernel
from halfway.passes import PassResult, register_pass

register_op(OpSchema("square_relu", inputs=(Slot("X"),), outputs=(Slot("Out"),), infer=same_as("X", "Out")))


@register_kernel("square_relu")
def square_relu_kernel(spec):
    def run(x):
        y = x * (x > 0)
        return y * y

    return run


@register_pass("swap_relu_for_square_relu")
def swap_relu(program, scope, options):
    """Replace relu by square_relu (a plugin op)."""
    swapped = 0
    for block in program.blocks:
        for op in list(block.ops):
            if op.type == "relu":
                index = block.op_index(op)
                block.remove_op(op)
                block.insert_op(index, type(op)("square_relu", {"X": op.input("X")}, {"Out": op.output("Out")}))
                swapped += 1
    return PassResult(program, swapped > 0, {"swapped": swapped})
