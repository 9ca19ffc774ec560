"""Worker side: tell the checker when a Triton compile starts and ends, so it can lend the GPU lock.

On a GPU shared by several submissions (`grade --per-gpu N`), the checker holds the GPU's lock while
the worker runs (grader.perf.gpu_lock). Compiling a kernel is seconds of CPU work that needs no GPU, and a
cold submission compiles for most of its run. Triton calls `jit_cache_hook` before each compile and
`jit_post_compile_hook` after it; we send `compiling`, then `compiled`, and wait for the checker's
`resume` (it holds the lock again) before the kernel may launch.

Nothing here is trusted. Student code can unset the hooks (the lock is then kept through its compiles:
slower for its neighbours, never wrong) or send the messages itself, which lets it launch work without
the lock; SECURITY.md says what that can and cannot do to a neighbour's timing.
"""

from __future__ import annotations

import threading


class CompileNotices:
    """Hooks Triton's compiles to the channel on `sock` (the worker's end)."""

    def __init__(self, sock, transport):
        self.sock, self.transport = sock, transport
        self.compiling = False
        self.turn = threading.Lock()   # compiles in two threads must not interleave their frames

    def install(self) -> None:
        try:
            from triton import knobs
        except ImportError:   # an older Triton: the lock is simply kept through compiles
            return
        knobs.runtime.jit_cache_hook = self.before
        knobs.runtime.jit_post_compile_hook = self.after

    def new_request(self) -> None:
        self.compiling = False   # a compile that raised never reached `after`

    def before(self, **_):
        from grader.worker import channel
        from grader.worker.guarded_call import synchronize

        with self.turn:
            if not self.compiling:
                self.compiling = True
                synchronize()        # kernels queued before the compile must not run on into a lent hold
                channel.send_frame(self.sock, channel.dump_reply("compiling"))
        return None              # a true value would tell Triton to skip the compile

    def after(self, **_):
        from grader.worker import channel

        with self.turn:
            if self.compiling:       # another thread's compile may still run: it just lends no more
                self.compiling = False
                channel.send_frame(self.sock, channel.dump_reply("compiled"))
                answer = self.transport.load_request(channel.recv_frame(self.sock))
                if not isinstance(answer, channel.Resume):
                    raise RuntimeError(f"the grader answered a compile with {type(answer).__name__}")
        return None
