"""Passes and the pass manager. Importing this package registers every built-in pass."""

# built-in passes (one import per line)
from . import (
                                    attention_heads,  # noqa: F401
                                    cache_attention,  # noqa: F401
                                    casts,  # noqa: F401
                                    channels_last,  # noqa: F401
                                    constants,  # noqa: F401
                                    cse,  # noqa: F401
                                    dce,  # noqa: F401
                                    float16,  # noqa: F401
                                    fuse_activations,  # noqa: F401
                                    fuse_attention,  # noqa: F401
                                    fuse_bn_relu_conv,  # noqa: F401
                                    fuse_cached_attention,  # noqa: F401
                                    fuse_conv_act,  # noqa: F401
                                    fuse_conv_bn,  # noqa: F401
                                    fuse_conv_pool,  # noqa: F401
                                    fuse_fc,  # noqa: F401
                                    fuse_gqa,  # noqa: F401
                                    fuse_norm,  # noqa: F401
                                    fuse_pad,  # noqa: F401
                                    fuse_projections,  # noqa: F401
                                    fuse_rotary,  # noqa: F401
                                    identity,  # noqa: F401
                                    layout,  # noqa: F401
                                    reorder_pool_conv,  # noqa: F401
                                    shapes,  # noqa: F401
)
from .base import Pass, PassInfo, PassResult, get_pass, register_pass, registered_passes
from .manager import PassManager, PassRecord, PipelineResult, parse_pipeline
from .pattern import Match, OpPattern, Pattern, VarPattern, op, pattern, var
from .pipeline import DEFAULT_PIPELINE
from .rewrite import (
                                    Decline,
                                    NearMiss,
                                    RewriteContext,
                                    RewriteStats,
                                    Rule,
                                    Rules,
                                    apply_rules,
                                    collect_near_misses,
                                    copy_op,
                                    register_rules,
)

__all__ = [
    "Pass", "PassInfo", "PassResult", "get_pass", "register_pass", "registered_passes",
    "PassManager", "PassRecord", "PipelineResult", "parse_pipeline", "DEFAULT_PIPELINE",
    "Pattern", "OpPattern", "VarPattern", "Match", "op", "var", "pattern",
    "Rule", "Rules", "RewriteContext", "RewriteStats", "Decline", "NearMiss", "apply_rules", "copy_op",
    "register_rules", "collect_near_misses",
]
