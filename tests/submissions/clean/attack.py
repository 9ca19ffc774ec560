# modules: softmax matmul flash_attention mixed_precision
"""No attack: the reference solutions, graded in the same batch as every attack (full marks)."""
