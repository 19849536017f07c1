"""Layer functions of the neural-network ops, in the style of Paddle's fluid layers.

Each layer names itself like Paddle (``conv2d_0``) and its parameters after it
(``conv2d_0.w_0`` filter, ``conv2d_0.b_0`` bias; batch_norm's scale, mean, variance are
``.w_0/.w_1/.w_2`` and its bias ``.b_0``). ``param_attr``/``bias_attr`` take an initializer
(``bias_attr=False``: no bias). A conv bias is ``elementwise_add(axis=1)`` of a [C] parameter
(Paddle exports a ``reshape2`` to [1, C, 1, 1] and axis -1 instead: same numbers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..builder import append_op, apply_act, atomic, create_parameter, default_main_program
from ..errors import IRError
from ..initializers import Constant, Initializer, KaimingNormal, XavierUniform
from ..variable import Variable

__all__ = ["conv2d", "conv2d_transpose", "pool2d", "adaptive_pool2d", "batch_norm", "lrn", "pad3d", "dropout",
           "softmax", "matmul", "mul", "fc"]

IntOrPair = int | Sequence[int]
BiasAttr = bool | Initializer | None


def _pair(value: IntOrPair, what: str) -> list[int]:
    values = [value, value] if isinstance(value, int) else list(value)
    if len(values) != 2:
        raise IRError(f"{what} must be an int or 2 ints, got {value!r}")
    return values


def _padding(padding: IntOrPair | str) -> dict[str, object]:
    """Paddle-fluid padding: an int, [ph, pw], [top, bottom, left, right], or "SAME"/"VALID"."""
    if isinstance(padding, str):
        return {"padding_algorithm": padding.upper(), "paddings": [0, 0]}
    values = [padding, padding] if isinstance(padding, int) else list(padding)
    return {"padding_algorithm": "EXPLICIT", "paddings": values}


def _layer_name(kind: str, name: str | None) -> str:
    return name or default_main_program().unique_name(kind)


def _param(layer: str, suffix: str, shape: Sequence[int], attr: Initializer | None,
           default: Initializer) -> Variable:
    return create_parameter(f"{layer}.{suffix}", shape, initializer=attr or default)


def _add_bias(x: Variable, layer: str, size: int, bias_attr: BiasAttr, axis: int) -> Variable:
    """``x + b`` with a [size] bias parameter along ``axis``; ``x`` when bias_attr is False."""
    if bias_attr is False:
        return x
    init = bias_attr if isinstance(bias_attr, Initializer) else None
    bias = _param(layer, "b", [size], init, Constant(0.0))
    return append_op("elementwise_add", {"X": x, "Y": bias}, {"axis": axis}, name=layer)["Out"][0]


def _channels(x: Variable, data_format: str) -> int:
    shape = x.tensor_shape
    c = shape[-1] if data_format.endswith("C") else shape[1]
    if c < 0:
        raise IRError(f"{x.name}: the channel dim of {list(shape)} must be known to create parameters")
    return c


@atomic
def conv2d(input: Variable, num_filters: int, filter_size: IntOrPair, stride: IntOrPair = 1,
           padding: IntOrPair | str = 0, dilation: IntOrPair = 1, groups: int = 1,
           param_attr: Initializer | None = None, bias_attr: BiasAttr = True, act: str | None = None,
           data_format: str = "NCHW", name: str | None = None) -> Variable:
    """A 2-D convolution, + bias, + ``act``. ``depthwise_conv2d`` when groups == input channels
    (> 1) and num_filters is a multiple of them, as Paddle chooses."""
    c = _channels(input, data_format)
    if c % groups or num_filters % groups:
        raise IRError(f"conv2d: groups={groups} must divide input channels ({c}) and num_filters ({num_filters})")
    op_type = "depthwise_conv2d" if groups == c > 1 and num_filters % c == 0 else "conv2d"
    layer = _layer_name(op_type, name)
    w = _param(layer, "w", [num_filters, c // groups, *_pair(filter_size, "filter_size")], param_attr,
               KaimingNormal())
    attrs = {"strides": _pair(stride, "stride"), "dilations": _pair(dilation, "dilation"), "groups": groups,
             "data_format": data_format, **_padding(padding)}
    out = append_op(op_type, {"Input": input, "Filter": w}, attrs, name=layer)["Output"][0]
    out = _add_bias(out, layer, num_filters, bias_attr, axis=-1 if data_format == "NHWC" else 1)
    return apply_act(out, act)


@atomic
def conv2d_transpose(input: Variable, num_filters: int, filter_size: IntOrPair, output_size: IntOrPair | None = None,
                     stride: IntOrPair = 1, padding: IntOrPair | str = 0, dilation: IntOrPair = 1, groups: int = 1,
                     param_attr: Initializer | None = None, bias_attr: BiasAttr = True, act: str | None = None,
                     data_format: str = "NCHW", name: str | None = None) -> Variable:
    """A transposed 2-D convolution (filter [C_in, num_filters / groups, kh, kw]), + bias, + ``act``."""
    c = _channels(input, data_format)
    layer = _layer_name("conv2d_transpose", name)
    w = _param(layer, "w", [c, num_filters // groups, *_pair(filter_size, "filter_size")], param_attr,
               XavierUniform())
    attrs = {"strides": _pair(stride, "stride"), "dilations": _pair(dilation, "dilation"), "groups": groups,
             "data_format": data_format, "output_size": [] if output_size is None else _pair(output_size, "output_size"),
             **_padding(padding)}
    out = append_op("conv2d_transpose", {"Input": input, "Filter": w}, attrs, name=layer)["Output"][0]
    out = _add_bias(out, layer, num_filters, bias_attr, axis=-1 if data_format == "NHWC" else 1)
    return apply_act(out, act)


def pool2d(input: Variable, pool_size: IntOrPair = -1, pool_type: str = "max", pool_stride: IntOrPair = 1,
           pool_padding: IntOrPair | str = 0, global_pooling: bool = False, ceil_mode: bool = False,
           exclusive: bool = True, adaptive: bool = False, data_format: str = "NCHW",
           name: str | None = None) -> Variable:
    """2-D pooling. With ``global_pooling`` pool_size is ignored (written as [1, 1] unless given)."""
    if pool_size == -1 and not global_pooling:
        raise IRError("pool2d: give pool_size, or global_pooling=True")
    ksize = _pair(pool_size, "pool_size") if pool_size != -1 else [1, 1]
    attrs = {"pooling_type": pool_type, "ksize": ksize, "strides": _pair(pool_stride, "pool_stride"),
             "global_pooling": global_pooling, "ceil_mode": ceil_mode, "exclusive": exclusive,
             "adaptive": adaptive, "data_format": data_format, **_padding(pool_padding)}
    return append_op("pool2d", {"X": input}, attrs, name=_layer_name("pool2d", name))["Out"][0]


def adaptive_pool2d(input: Variable, pool_size: IntOrPair, pool_type: str = "max",
                    data_format: str = "NCHW", name: str | None = None) -> Variable:
    """Pool each plane to ``pool_size`` with windows that tile the input (``pool2d(adaptive=True)``)."""
    return pool2d(input, pool_size, pool_type, adaptive=True, data_format=data_format, name=name)


@atomic
def batch_norm(input: Variable, act: str | None = None, epsilon: float = 1e-5, momentum: float = 0.9,
               param_attr: Initializer | None = None, bias_attr: Initializer | None = None,
               data_layout: str = "NCHW", name: str | None = None) -> Variable:
    """Inference batch norm over the channel dim, + ``act``. Scale 1, bias 0, mean 0 and variance
    1 unless initializers are given (or values passed to ``init_scope``)."""
    c = _channels(input, data_layout)
    layer = _layer_name("batch_norm", name)
    scale = _param(layer, "w", [c], param_attr, Constant(1.0))
    mean = _param(layer, "w", [c], None, Constant(0.0))
    variance = _param(layer, "w", [c], None, Constant(1.0))
    bias = _param(layer, "b", [c], bias_attr, Constant(0.0))
    outs = append_op("batch_norm", {"X": input, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": variance},
                     {"epsilon": epsilon, "momentum": momentum, "data_layout": data_layout, "is_test": True,
                      "use_global_stats": True},
                     outputs={"Y": 1, "MeanOut": [mean], "VarianceOut": [variance], "SavedMean": 1,
                              "SavedVariance": 1},
                     name=layer)
    return apply_act(outs["Y"][0], act)


def lrn(input: Variable, n: int = 5, k: float = 1.0, alpha: float = 1e-4, beta: float = 0.75,
        data_format: str = "NCHW", name: str | None = None) -> Variable:
    """Local response normalisation across ``n`` channels (fluid's defaults)."""
    attrs = {"n": n, "k": k, "alpha": alpha, "beta": beta, "data_format": data_format}
    return append_op("lrn", {"X": input}, attrs, name=_layer_name("lrn", name))["Out"][0]


def pad3d(input: Variable, paddings: Sequence[int] | Variable, mode: str = "constant", value: float = 0.0,
          data_format: str = "NCDHW", name: str | None = None) -> Variable:
    """Pad D, H, W of a 5-D tensor by ``paddings`` = [left, right, top, bottom, front, back]
    (or an int tensor holding them, known only at run time)."""
    attrs = {"mode": mode, "value": value, "data_format": data_format}
    inputs = {"X": input}
    if isinstance(paddings, Variable):
        inputs["Paddings"] = paddings
    else:
        attrs["paddings"] = list(paddings)
    return append_op("pad3d", inputs, attrs, name=_layer_name("pad3d", name))["Out"][0]


def dropout(x: Variable, dropout_prob: float, is_test: bool = True,
            dropout_implementation: str = "downgrade_in_infer", name: str | None = None) -> Variable:
    """Inference dropout: scales by 1 - dropout_prob (downgrade_in_infer) or passes x through."""
    attrs = {"dropout_prob": dropout_prob, "is_test": is_test, "dropout_implementation": dropout_implementation}
    return append_op("dropout", {"X": x}, attrs, name=_layer_name("dropout", name))["Out"][0]


def softmax(input: Variable, axis: int = -1, name: str | None = None) -> Variable:
    return append_op("softmax", {"X": input}, {"axis": axis}, name=_layer_name("softmax", name))["Out"][0]


def matmul(x: Variable, y: Variable, transpose_x: bool = False, transpose_y: bool = False,
           name: str | None = None) -> Variable:
    """``numpy.matmul`` semantics (``matmul_v2``)."""
    attrs = {"trans_x": transpose_x, "trans_y": transpose_y}
    return append_op("matmul_v2", {"X": x, "Y": y}, attrs, name=_layer_name("matmul_v2", name))["Out"][0]


def mul(x: Variable, y: Variable, x_num_col_dims: int = 1, y_num_col_dims: int = 1,
        name: str | None = None) -> Variable:
    """2-D product of x flattened at ``x_num_col_dims`` and y flattened at ``y_num_col_dims``."""
    attrs = {"x_num_col_dims": x_num_col_dims, "y_num_col_dims": y_num_col_dims}
    return append_op("mul", {"X": x, "Y": y}, attrs, name=_layer_name("mul", name))["Out"][0]


@atomic
def fc(input: Variable, size: int, num_flatten_dims: int = 1, param_attr: Initializer | None = None,
       bias_attr: BiasAttr = True, act: str | None = None, name: str | None = None) -> Variable:
    """A fully connected layer with weight [in, size], in = prod(input.shape[num_flatten_dims:]).

    Over the last dim it is Paddle's Linear, ``matmul_v2``; flattening several dims it is
    fluid's fc, ``mul(x_num_col_dims=num_flatten_dims)``. Then ``elementwise_add`` of the bias
    and ``act``.
    """
    shape = input.tensor_shape
    rank = len(shape)
    cols = num_flatten_dims + rank if num_flatten_dims < 0 else num_flatten_dims
    if not 0 < cols < rank:
        raise IRError(f"fc: num_flatten_dims={num_flatten_dims} is out of range for {input.name} {list(shape)}")
    if any(d < 0 for d in shape[cols:]):
        raise IRError(f"fc: dims {list(shape[cols:])} of {input.name} must be known to size the weight")
    fan_in = math.prod(shape[cols:])
    layer = _layer_name("fc", name)
    w = _param(layer, "w", [fan_in, size], param_attr, XavierUniform())
    if cols == rank - 1:
        out = append_op("matmul_v2", {"X": input, "Y": w}, name=layer)["Out"][0]
    else:
        out = append_op("mul", {"X": input, "Y": w}, {"x_num_col_dims": cols}, name=layer)["Out"][0]
    return apply_act(_add_bias(out, layer, size, bias_attr, axis=-1), act)
