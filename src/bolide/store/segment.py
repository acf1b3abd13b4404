"""A fixed-size file mapped into memory: the unit of the commit log, consume queues and index.

The file is created at its full size (sparse) and mapped once. Disk blocks are reserved with
fallocate in chunks *ahead* of the write position (:meth:`MappedSegment.ensure_allocated`),
so a mapped write never lands on a hole: on a full disk the reservation fails with ENOSPC
before anything is written, instead of the process dying of SIGBUS in the middle of a copy.

Writes happen on the event loop thread (memory copies); fsync happens in a flush thread on a
duplicate of the file descriptor, so closing a segment while it is being synced is safe.

Pre-faulting a reserved chunk (one madvise, ~1.5 ms per MiB here) runs on a prefault thread
(:func:`prefault_pool`) for chunks over limits.SEGMENT_PREFAULT_INLINE_MAX_BYTES, so
the event loop never waits for it; a write that gets ahead of it faults its page itself, which
is merely slower. The madvise goes through libc with the GIL released (``mmap.madvise`` keeps
the GIL for the whole call, which would stall the loop thread all the same), and a segment
closing waits for its pre-fault in flight so the range is never unmapped under it.

Warm start (RocketMQ's allocate-ahead service and warmMapedFileEnable): a segment made with
``ahead_bytes`` asks for its next chunk once the writes come within ``ahead_bytes`` of the end
of the reserved blocks (``refill_position``), so that chunk is faulted in before it is written;
and a *spare* segment (:meth:`MappedSegment.create_spare`) is made, reserved and faulted in
whole on the allocate-ahead thread (:func:`allocate_pool`) under its temporary name, then put
in place by :meth:`MappedSegment.adopt` (one rename) when the log rolls onto it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import mmap
import os
import threading
from collections.abc import Callable
from pathlib import Path

from bolide.base import limits
from bolide.base.errors import CorruptDataError, StoreIOError, invariant
from bolide.store.file_ops import FileOps, translate_os_error

TEMPORARY_SUFFIX = ".tmp"
"""A file being created; a leftover one (crash during creation) is deleted at load."""
SPARE_SUFFIX = ".spare" + TEMPORARY_SUFFIX
"""A segment made ahead of need (:meth:`MappedSegment.create_spare`): apart from the name an
inline create uses for the same file, and a leftover like any other temporary file."""

_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)
"""Linux 5.14+: pre-fault a range writable. Older kernels answer EINVAL, which is ignored."""


def _libc_madvise() -> Callable[[int, int, int], int] | None:
    """libc's madvise(addr, length, advice), called with the GIL released; None without it."""
    try:
        function = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    function.restype = ctypes.c_int
    madvise: Callable[[int, int, int], int] = function
    return madvise


_MADVISE = _libc_madvise()
_prefault_pool: concurrent.futures.ThreadPoolExecutor | None = None
_allocate_pool: concurrent.futures.ThreadPoolExecutor | None = None
_prefault_pool_lock = threading.Lock()


def prefault_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The process's one prefault thread (made on first use; idle, it costs nothing)."""
    global _prefault_pool  # one lazily made pool for the process
    with _prefault_pool_lock:
        if _prefault_pool is None:
            _prefault_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="bolide-prefault"
            )
        return _prefault_pool


def allocate_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The process's one allocate-ahead thread, which makes spare segments (made on first
    use). Apart from the prefault thread, so a spare being made never delays a chunk's
    pre-fault; each commit log keeps at most one spare in the making."""
    global _allocate_pool  # one lazily made pool for the process
    with _prefault_pool_lock:
        if _allocate_pool is None:
            _allocate_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="bolide-allocate-ahead"
            )
        return _allocate_pool


class MappedSegment:
    """One mapped file of ``size_bytes`` whose byte 0 is at ``start_offset`` of its log.

    Positions passed to methods are relative to the file. ``write_position`` is where the
    owner appends next; ``flushed_position`` how far an fsync is known to cover;
    ``refill_position`` how far writes may go before the owner asks for more blocks (the end of
    the reserved blocks, less ``ahead_bytes`` while the file is not reserved whole; kept by
    :meth:`ensure_allocated` and :meth:`set_allocated_position`). A segment
    becomes *poisoned* (``poison`` holds the reason) when an operation on it failed in a way
    that leaves its state on disk unknown; its owner then refuses appends until a restart
    runs recovery.
    """

    __slots__ = (
        "_ahead_bytes",
        "_allocation_chunk_bytes",
        "_closed",
        "_fd",
        "_file_ops",
        "_mapping",
        "_prefault_lock",
        "_prefaults",
        "allocated_position",
        "flushed_position",
        "needs_directory_sync",
        "path",
        "poison",
        "refill_position",
        "size_bytes",
        "start_offset",
        "view",
        "write_position",
    )

    def __init__(
        self,
        path: Path,
        start_offset: int,
        size_bytes: int,
        fd: int,
        *,
        allocation_chunk_bytes: int,
        file_ops: FileOps,
        ahead_bytes: int = 0,
    ) -> None:
        self.path = path
        self.start_offset = start_offset
        self.size_bytes = size_bytes
        self._fd: int | None = fd
        self._file_ops = file_ops
        self._allocation_chunk_bytes = allocation_chunk_bytes
        self._ahead_bytes = ahead_bytes
        self._mapping = mmap.mmap(fd, size_bytes)
        self._prefault_lock = threading.Lock()
        self._prefaults: concurrent.futures.Future[None] | None = None
        self.view = memoryview(self._mapping)
        self.write_position = 0
        self.flushed_position = 0
        self.allocated_position = 0
        self.refill_position = 0
        self.needs_directory_sync = False
        self.poison: str | None = None
        self._closed = False

    @classmethod
    def create(
        cls,
        path: Path,
        start_offset: int,
        size_bytes: int,
        *,
        allocation_chunk_bytes: int,
        file_ops: FileOps,
        ahead_bytes: int = 0,
    ) -> MappedSegment:
        """Create the file (which must not exist) at full size and map it.

        Raises:
            DiskFullError: no space for the file or its first chunk of blocks.
            StoreIOError: any other failure; the half-made file is removed.
        """
        if path.exists():
            raise StoreIOError(f"create {path}: the file exists already")
        # Sized under a temporary name, then renamed: a crash never leaves a file of the
        # final name with the wrong size (recovery would refuse the directory).
        segment = cls._create_mapped(
            path.with_name(path.name + TEMPORARY_SUFFIX),
            start_offset,
            size_bytes,
            allocation_chunk_bytes=allocation_chunk_bytes,
            file_ops=file_ops,
            ahead_bytes=ahead_bytes,
        )
        try:
            segment.adopt(path)
            segment.ensure_allocated(min(size_bytes, allocation_chunk_bytes))
        except BaseException:
            segment.delete_quietly()
            raise
        return segment

    @classmethod
    def create_spare(
        cls,
        path: Path,
        start_offset: int,
        size_bytes: int,
        *,
        allocation_chunk_bytes: int,
        file_ops: FileOps,
        ahead_bytes: int = 0,
    ) -> MappedSegment:
        """A segment made ahead of need (allocate-ahead thread): the file sized, mapped, its
        first chunk of blocks reserved and faulted in on the calling thread, all under
        ``path`` + ``.spare.tmp`` (a crash leaves only a leftover that load deletes). The owner
        puts it in place with :meth:`adopt` or drops it with :meth:`delete_quietly`.

        Raises:
            DiskFullError: no space for the file or its first chunk of blocks.
            StoreIOError: any other failure; the half-made file is removed.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        segment = cls._create_mapped(
            path.with_name(path.name + SPARE_SUFFIX),
            start_offset,
            size_bytes,
            allocation_chunk_bytes=allocation_chunk_bytes,
            file_ops=file_ops,
            ahead_bytes=ahead_bytes,
        )
        try:
            segment.ensure_allocated(min(size_bytes, allocation_chunk_bytes), populate_here=True)
        except BaseException:
            segment.delete_quietly()
            raise
        return segment

    @classmethod
    def _create_mapped(
        cls,
        temporary: Path,
        start_offset: int,
        size_bytes: int,
        *,
        allocation_chunk_bytes: int,
        file_ops: FileOps,
        ahead_bytes: int,
    ) -> MappedSegment:
        """The file made at ``temporary``, sized (sparse) and mapped; nothing reserved yet."""
        try:
            fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise translate_os_error(error, f"create {temporary}") from error
        try:
            os.ftruncate(fd, size_bytes)
            return cls(
                temporary,
                start_offset,
                size_bytes,
                fd,
                allocation_chunk_bytes=allocation_chunk_bytes,
                file_ops=file_ops,
                ahead_bytes=ahead_bytes,
            )
        except OSError as error:
            os.close(fd)
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise translate_os_error(error, f"create {temporary}") from error

    def adopt(self, path: Path) -> None:
        """Rename the file to its final ``path`` (which must not exist); the directory then
        needs an fsync before anything in the file counts as durable.

        Raises:
            StoreIOError: ``path`` exists or the rename failed (the file keeps its name).
        """
        if path.exists():
            raise StoreIOError(f"create {path}: the file exists already")
        try:
            self.path.rename(path)
        except OSError as error:
            raise translate_os_error(error, f"rename {self.path} to {path}") from error
        self.path = path
        self.needs_directory_sync = True

    def delete_quietly(self) -> None:
        """Close and remove the file, ignoring failures (a half-made or unused spare)."""
        self.close()
        with contextlib.suppress(OSError):
            self.path.unlink()

    @classmethod
    def open_existing(
        cls,
        path: Path,
        start_offset: int,
        size_bytes: int,
        *,
        allocation_chunk_bytes: int,
        file_ops: FileOps,
        ahead_bytes: int = 0,
    ) -> MappedSegment:
        """Map an existing file, which must be exactly ``size_bytes`` long.

        The write position starts at 0; the owner sets it after looking at the content.

        Raises:
            CorruptDataError: the file has another size (wrong configuration or damage).
            StoreIOError: the file cannot be opened or mapped.
        """
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError as error:
            raise translate_os_error(error, f"open {path}") from error
        try:
            actual_bytes = os.fstat(fd).st_size
            if actual_bytes != size_bytes:
                raise CorruptDataError(
                    f"{path} has {actual_bytes} bytes, the store expects {size_bytes}"
                )
            return cls(
                path,
                start_offset,
                size_bytes,
                fd,
                allocation_chunk_bytes=allocation_chunk_bytes,
                file_ops=file_ops,
                ahead_bytes=ahead_bytes,
            )
        except OSError as error:
            os.close(fd)
            raise StoreIOError(f"map {path}: {error}") from error
        except BaseException:
            os.close(fd)
            raise

    @property
    def end_offset(self) -> int:
        """Offset just past this segment in its log."""
        return self.start_offset + self.size_bytes

    @property
    def remaining_bytes(self) -> int:
        return self.size_bytes - self.write_position

    @property
    def closed(self) -> bool:
        return self._closed

    def ensure_allocated(self, end_position: int, *, populate_here: bool = False) -> None:
        """Make sure disk blocks back ``[0, end_position)``, reserving up to the next chunk
        boundary, and fault the reserved pages in ahead of the writes (on the calling thread
        when ``populate_here``, else as :meth:`_populate` decides).

        Raises:
            DiskFullError: no space (nothing is written; the segment stays usable).
            StoreIOError: any other failure; the segment is poisoned.
        """
        if end_position <= self.allocated_position:
            return
        invariant(end_position <= self.size_bytes, "allocation past the segment end")
        chunk = self._allocation_chunk_bytes
        target = min(self.size_bytes, (end_position // chunk + 1) * chunk)
        start = self.allocated_position
        try:
            self._file_ops.preallocate(self._open_fd(), start, target - start)
        except OSError as error:
            translated = translate_os_error(error, f"reserve blocks in {self.path}")
            if isinstance(translated, StoreIOError):
                self.poison = str(translated)
            raise translated from error
        self.set_allocated_position(target)
        if populate_here and _MADVISE is not None:
            aligned = start - start % mmap.PAGESIZE
            self._populate_on_thread(aligned, target - aligned)
        else:
            self._populate(start, target)

    def set_allocated_position(self, position: int) -> None:
        """Record that blocks back ``[0, position)`` and move ``refill_position`` with it."""
        self.allocated_position = position
        if position >= self.size_bytes or not self._ahead_bytes:
            self.refill_position = position
        else:
            self.refill_position = max(0, position - self._ahead_bytes)

    def _populate(self, start: int, end: int) -> None:
        """Fault pages in with one madvise instead of one page fault per 4 KiB written: a
        first write to a freshly reserved page costs ~25 µs through a fault (the kernel
        converts the block), which would dominate a 1 KiB append. Large ranges are faulted
        in on the prefault thread (see the module docstring)."""
        aligned = start - start % mmap.PAGESIZE
        if _MADVISE is None or end - aligned <= limits.SEGMENT_PREFAULT_INLINE_MAX_BYTES:
            with contextlib.suppress(OSError, ValueError):
                self._mapping.madvise(_MADV_POPULATE_WRITE, aligned, end - aligned)
            return
        self._prefaults = prefault_pool().submit(self._populate_on_thread, aligned, end - aligned)

    def _populate_on_thread(self, start: int, length: int) -> None:
        with self._prefault_lock:  # close() waits for this: the range stays mapped
            if self._closed or _MADVISE is None:
                return
            exported = ctypes.c_char.from_buffer(self._mapping, start)
            address = ctypes.addressof(exported)
            del exported  # no export left behind: close() may unmap once this returns
            _MADVISE(address, length, _MADV_POPULATE_WRITE)  # errors: a plain fault later

    def wait_prefaulted(self) -> None:
        """Wait for the pre-fault in flight, if any (tests and benches)."""
        pending = self._prefaults
        if pending is not None:
            pending.result()

    def write(self, position: int, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` to ``position`` (which must lie inside reserved blocks)."""
        end = position + len(data)
        invariant(end <= self.allocated_position, f"write to unreserved blocks of {self.path}")
        self._mapping[position:end] = data

    def write_length_last(self, position: int, record: bytes | memoryview) -> None:
        """Copy a record whose first 4 bytes are its length, writing those 4 bytes last.

        A process killed mid-copy leaves a length of zero (the area was zero before), which
        recovery reads as "nothing here": a torn record is never mistaken for a whole one.
        """
        end = position + len(record)
        invariant(end <= self.allocated_position, f"write to unreserved blocks of {self.path}")
        source = memoryview(record)
        mapping = self._mapping
        mapping[position + 4 : end] = source[4:]
        mapping[position : position + 4] = source[:4]

    def _open_fd(self) -> int:
        fd = self._fd
        invariant(fd is not None and not self._closed, f"{self.path} is sealed or closed")
        assert fd is not None  # for mypy; the invariant above says why
        return fd

    @property
    def sealed(self) -> bool:
        return self._fd is None

    def seal_if_complete(self) -> None:
        """Close the descriptor of a segment that is full and flushed: it will never be
        written or synced again, and thousands of consume-queue files must not hold
        thousands of descriptors. The mapping stays for reads."""
        if self._fd is not None and self.flushed_position >= self.size_bytes:
            os.close(self._fd)
            self._fd = None

    def duplicate_fd(self) -> int:
        """A duplicate descriptor for a flush thread; the caller closes it."""
        return os.dup(self._open_fd())

    def cut(self, position: int) -> None:
        """Zero everything from ``position`` to the end (recovery cutting a torn tail).

        Shrinking the file and growing it back turns the tail into a hole that reads as zeros,
        without writing a gigabyte of zeros.

        Raises:
            StoreIOError: the file could not be resized.
        """
        try:
            fd = self._open_fd()
            os.ftruncate(fd, position)
            os.ftruncate(fd, self.size_bytes)
        except OSError as error:
            raise StoreIOError(f"cut {self.path} at {position}: {error}") from error
        self.write_position = min(self.write_position, position)
        self.flushed_position = min(self.flushed_position, position)
        self.set_allocated_position(min(self.allocated_position, position))

    def close(self) -> None:
        """Unmap and close. Views handed out earlier keep the mapping alive until they go."""
        if self._closed:
            return
        with self._prefault_lock:  # a pre-fault in flight finishes first (a few ms at most)
            self._closed = True
        with contextlib.suppress(BufferError):
            self.view.release()
        with contextlib.suppress(BufferError):
            # Views still held by readers (a pull being written to a socket): the mapping is
            # unmapped when the last of them is released.
            self._mapping.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        """Close and remove the file.

        Raises:
            StoreIOError: the file could not be removed.
        """
        self.close()
        try:
            self.path.unlink(missing_ok=True)
        except OSError as error:
            raise StoreIOError(f"delete {self.path}: {error}") from error


def settle_allocate_ahead() -> None:
    """Return once the allocate-ahead thread has finished all it was given so far, the deletion
    of dropped spares included (tests and benches that copy a live store's files: a spare
    dropped before it was made is deleted on that thread, at any moment)."""
    allocate_pool().submit(int).result()


def discard_when_made(spare: concurrent.futures.Future[MappedSegment]) -> None:
    """Drop a spare without waiting: cancelled if not started, else deleted once made (on
    the thread that made it)."""
    if not spare.cancel():
        spare.add_done_callback(_delete_made)


def wait_made(spare: concurrent.futures.Future[MappedSegment] | None) -> MappedSegment | None:
    """The spare once made (tests and benches wait for it); None when there is none or making
    it failed."""
    if spare is None:
        return None
    try:
        return spare.result()
    except Exception:
        return None


def _delete_made(spare: concurrent.futures.Future[MappedSegment]) -> None:
    with contextlib.suppress(Exception, concurrent.futures.CancelledError):
        spare.result().delete_quietly()


def remove_leftovers(directory: Path) -> None:
    """Delete files a crash left half-created in ``directory`` (``*.tmp``)."""
    for path in directory.glob(f"*{TEMPORARY_SUFFIX}"):
        with contextlib.suppress(OSError):
            path.unlink()
