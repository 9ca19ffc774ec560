# target: flash_attention
"""A variant of the reference: a demo under `if __name__ == "__main__":` that compares against
torch.einsum. The block never runs when graded; the variant must score what the reference scores."""

if __name__ == "__main__":
    q = torch.randn(1, 2, 16, 16)  # noqa: F821 - torch is imported by the reference above
    scores = torch.einsum("bhqd,bhkd->bhqk", q, q) / 4.0  # noqa: F821
    print(flash_attention_forward(q, q, q)[0].shape, scores.softmax(-1).shape)  # noqa: F821
