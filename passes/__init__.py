"""Passes and the pass manager. Importing this package registers every built-in pass."""

from halfway.passes.base import Pass, PassInfo, PassResult, get_pass, register_pass, registered_passes
from halfway.passes.manager import PassManager, PassRecord, PipelineResult, parse_pipeline
from halfway.passes.pattern import Match, OpPattern, Pattern, VarPattern, op, pattern, var
from halfway.passes.pipeline import DEFAULT_PIPELINE
from halfway.passes.rewrite import (Decline, NearMiss, RewriteContext, RewriteStats, Rule, Rules, apply_rules,
                                    collect_near_misses, copy_op, register_rules)

# built-in passes (one import per line)
from halfway.passes import fuse_conv_bn  # noqa: F401
from halfway.passes import fuse_bn_relu_conv  # noqa: F401
from halfway.passes import reorder_pool_conv  # noqa: F401
from halfway.passes import fuse_conv_act  # noqa: F401
from halfway.passes import fuse_conv_pool  # noqa: F401
from halfway.passes import fuse_fc  # noqa: F401
from halfway.passes import fuse_activations  # noqa: F401
from halfway.passes import fuse_norm  # noqa: F401
from halfway.passes import fuse_attention  # noqa: F401
from halfway.passes import attention_heads  # noqa: F401
from halfway.passes import dce  # noqa: F401
from halfway.passes import identity  # noqa: F401
from halfway.passes import constants  # noqa: F401
from halfway.passes import shapes  # noqa: F401
from halfway.passes import layout  # noqa: F401
from halfway.passes import casts  # noqa: F401
from halfway.passes import channels_last  # noqa: F401
from halfway.passes import float16  # noqa: F401

__all__ = [
    "Pass", "PassInfo", "PassResult", "get_pass", "register_pass", "registered_passes",
    "PassManager", "PassRecord", "PipelineResult", "parse_pipeline", "DEFAULT_PIPELINE",
    "Pattern", "OpPattern", "VarPattern", "Match", "op", "var", "pattern",
    "Rule", "Rules", "RewriteContext", "RewriteStats", "Decline", "NearMiss", "apply_rules", "copy_op",
    "register_rules", "collect_near_misses",
]
