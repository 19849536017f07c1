"""The default inference pipeline, by pass name (``PassManager()`` runs it).

Clean up first (identities, constants, shape arithmetic whose run-time dims are provably equal,
chains of layout ops, the casts that change nothing: exporters write float32 -> float32 casts
inside attention); fuse GELU's and SiLU's elementwise ops into one op, and SwiGLU's
silu(gate) * up, so that a conv's SiLU reaches its epilogue; fold the pads written before convs
and pools into their paddings (TensorFlow's "SAME" exports), then batch_norm into weights before
fusing the epilogues (bias, activation) into conv and fc ops; then RMSNorm's and LayerNorm's
elementwise ops into one op, a residual add into the norm after it (or else into the fc before
it), attention and the rotary embeddings; the products of one input (attention's query, key and
value; the gate and up projections of a SwiGLU MLP, gated in the product's epilogue) into one;
compute once what every layer computes alike (the mask exports build per layer); then drop what
became dead, let grouped-query attention read its key/value heads without their repeat, drop
what that left, and last take the head split and merge around each attention (and the rotary
embeddings after the split) into its sequence-major form (dead readers of the split values, the
shape ops fusions leave, would hold both back); a decoder's cached attention (a checkpoint's
program has it from the start) takes its query and key rotations and reads its projection packed.
"""

from __future__ import annotations

__all__ = ["DEFAULT_PIPELINE"]

DEFAULT_PIPELINE = ("remove_identity,fold_constants,simplify_shapes,simplify_layout,cancel_exact_casts,fuse_activations,"
                    "fuse_pad,fuse_conv_bn,fuse_bn_relu_conv,reorder_pool_conv,fuse_conv_act,fuse_fc,fuse_norm,fuse_residual,fuse_attention,"
                    "fuse_rotary,fuse_projections,cse,dce,fuse_gqa,dce,fuse_attention_heads,fuse_cached_attention")
