"""The seccomp layer of the sandbox: deny networking, exec, new processes and writes.

Built with pyseccomp over the system libseccomp (Debian ``libseccomp2``). Denied calls fail
with EPERM (the program sees an ``OSError``), everything else is allowed: Python itself keeps
working (mmap, read, brk, futex), only what a verification program never needs is cut off.

Two filters, stacked (the kernel applies every filter a process has loaded; they are inherited
across fork and cannot be removed):

- the *worker* filter, loaded by the worker itself once it has started: everything in
  ``DENIED_SYSCALLS`` except ``CHILD_ONLY_SYSCALLS``, which the worker needs to fork, limit and
  kill its children. The worker then can no longer reach the network, exec, or write files;
- the *child* filter, loaded in each forked child before the program runs:
  ``CHILD_ONLY_SYSCALLS`` (no new processes, no signals to others, no raising the limits).

A child thus runs under all of ``DENIED_SYSCALLS``, and loading its part costs little (the
kernel checks and JIT-compiles a filter at every load, so a short one is cheap per program).
When pyseccomp or libseccomp is missing, ``build_filters`` returns ``(None, None, reason)`` and
the sandbox reports ``seccomp: off (<reason>)``; whether that is acceptable is the caller's
choice (``SandboxConfig.seccomp``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import tempfile

DENIED_SYSCALLS = (
    # network
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto", "sendmsg", "sendmmsg",
    # new programs and processes
    "execve", "execveat", "fork", "vfork", "clone", "clone3", "ptrace", "kill", "tkill",
    # the file system: no new, renamed, removed or re-permissioned files
    "creat", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat",
    "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "truncate",
    "ftruncate", "mknod", "mknodat",
    # escaping the other layers
    "setrlimit", "prlimit64", "mount", "umount2", "unshare", "setns", "chroot", "pivot_root", "personality",
    "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd", "process_vm_writev",
    "openat2", "io_uring_setup", "name_to_handle_at", "open_by_handle_at",
)
CHILD_ONLY_SYSCALLS = ("fork", "vfork", "clone", "clone3", "kill", "tkill", "setrlimit", "prlimit64")
WRITE_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class CompiledFilter:
    """The filter compiled to BPF once; ``load`` installs it with two prctl calls (cheap in each child)."""

    def __init__(self, bpf: bytes) -> None:
        self._buffer = ctypes.create_string_buffer(bpf, len(bpf))
        self._prog = _SockFprog(len(bpf) // 8, ctypes.cast(self._buffer, ctypes.c_void_p))
        self._libc = ctypes.CDLL(None, use_errno=True)

    def load(self) -> None:
        if self._libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if self._libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self._prog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def _compile(pyseccomp, names: tuple[str, ...], deny_write_opens: bool) -> CompiledFilter:
    filt = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    deny = pyseccomp.ERRNO(errno.EPERM)
    for name in names:
        try:
            filt.add_rule(deny, name)
        except (RuntimeError, ValueError, OSError):
            continue  # a syscall this architecture does not have (e.g. fork on arm64)
    if deny_write_opens:
        for flag in WRITE_FLAGS:  # open(path, flags) and openat(dirfd, path, flags)
            filt.add_rule(deny, "open", pyseccomp.Arg(1, pyseccomp.MASKED_EQ, flag, flag))
            filt.add_rule(deny, "openat", pyseccomp.Arg(2, pyseccomp.MASKED_EQ, flag, flag))
    with tempfile.TemporaryFile() as handle:
        filt.export_bpf(handle)
        handle.seek(0)
        return CompiledFilter(handle.read())


def build_filters() -> tuple[CompiledFilter | None, CompiledFilter | None, str]:
    """The worker filter, the child filter (see the module docstring) and a one-line status."""
    try:
        import pyseccomp
    except Exception as exc:  # ImportError, or OSError when libseccomp.so.2 is missing
        return None, None, f"off (pyseccomp unavailable: {type(exc).__name__}: {exc})"
    try:
        worker = _compile(pyseccomp, tuple(n for n in DENIED_SYSCALLS if n not in CHILD_ONLY_SYSCALLS), True)
        child = _compile(pyseccomp, CHILD_ONLY_SYSCALLS, False)
    except Exception as exc:
        return None, None, f"off (filter could not be built: {type(exc).__name__}: {exc})"
    return worker, child, "on"
