"""An append-only file of checksummed records, shared by the processes of one host.

The file starts with :data:`MAGIC`; each record after it is a frame: its
payload's length and CRC-32 (8 bytes, big-endian), then the payload.  A write
appends one whole frame with one ``pwrite`` under an exclusive ``flock`` on a
separate lock file, so a frame is either complete or the torn tail of a
writer that died.  A reader never needs the lock (records are never changed
in place), so reading never waits for a writer.

A record longer than :data:`MAX_RECORD` is refused before anything is
written (:class:`~.base.StoreError`): a reader takes a longer length for
damage.  A frame a reader cannot read (cut short, failing its checksum, or
with a length no record has) is one of two things:

* the **torn tail** of a write that never finished (a crash, a power cut)
  when no good frame follows it: readers stop there and wait, and the next
  writer cuts it off before it appends (no write after it was acknowledged);
* **damage** when a good frame follows it (a flipped bit, a record an
  earlier release wrote over the limit): readers skip to that frame, and an
  error in the log says how many bytes were lost where.  Nothing after the
  damage is ever cut off.  (The search finds the frames of records under
  16 MiB: damage followed only by larger records is taken for a torn tail.)

Compaction writes the live records to a new file (:meth:`RecordLog.rewrite`)
and renames it over the old one; the process that wrote it reads on from its
end, and every other process notices the new inode on its next
:meth:`RecordLog.changes` and reads the new file from the start.  Every file
switch is atomic (a rename after ``fsync``), so a kill at any moment leaves
either the old file or the new.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import struct
import time
import zlib
from typing import Iterator, List, Optional, Tuple

from ..concurrency import off_the_hub
from .base import StoreError

log = logging.getLogger("a2a_flask.stores")

#: The first bytes of a log file: the format and its version.
MAGIC = b"a2a_flask record log 1\n"
_FRAME = struct.Struct(">II")
_NONZERO = re.compile(b"[^\\0]")
#: A frame longer than this is taken for garbage (a torn header), not a record;
#: writing a longer one is refused.
MAX_RECORD = 1 << 30
#: How much of the file one read takes while catching up.
READ_CHUNK = 1 << 22
#: Longest wait for another process's write lock before giving up (seconds).
LOCK_TIMEOUT = 30.0


class LockTimeout(OSError):
    """Another process held the write lock for longer than ``LOCK_TIMEOUT``: an outage
    (the store's methods turn it into :class:`~a2a_flask.StoreUnavailable`)."""


def frame(payload: bytes) -> bytes:
    """One record as it goes into the file.

    :raises StoreError: for an empty payload or one over :data:`MAX_RECORD`,
        which no reader would take for a record.
    """
    if not 0 < len(payload) <= MAX_RECORD:
        raise StoreError(f"a record of {len(payload)} bytes cannot be stored: a record "
                         f"holds 1 to {MAX_RECORD} bytes")
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def _fsync_directory(path: str) -> None:
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _lock_pauses(timeout: float) -> Iterator[float]:
    """Pauses between lock attempts: 0.2 ms doubling to 20 ms, for ``timeout`` in all."""
    deadline = time.monotonic() + timeout
    pause = 0.0002
    while time.monotonic() < deadline:
        yield pause
        pause = min(pause * 2, 0.02)


class RecordLog:
    """One log file (``path``) with its lock file (``lock_path``), opened in this process.

    ``read_only``: the log must exist, and is only read (readers need no lock, so
    the lock file is neither opened nor created); writing raises an OSError.
    Not thread-safe: the caller serialises calls (the shelve store holds its own lock).
    """

    def __init__(self, path: str, lock_path: str, *, read_only: bool = False) -> None:
        self.path = path
        self.lock_path = lock_path
        self.read_only = read_only
        self._fd = -1
        self._lock_fd = -1
        self._pid = 0
        self._ino = 0
        #: Where the valid records seen so far end (the next frame starts here).
        self.end = 0
        self._open()

    # ------------------------------------------------------------ files

    def _open(self) -> None:
        """Open the lock file and the log (creating it if needed) in this process."""
        self.close()
        self._pid = os.getpid()
        if self.read_only:
            self._reopen_log()
            return
        self._lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if not os.path.exists(self.path):
            with self.locked():
                if not os.path.exists(self.path):
                    Rewrite(self.path).install()
        self._reopen_log()

    def _reopen_log(self) -> None:
        fd = os.open(self.path, (os.O_RDONLY if self.read_only else os.O_RDWR) | os.O_CLOEXEC)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd
        self._ino = os.fstat(fd).st_ino
        head = os.pread(fd, len(MAGIC), 0)
        if head != MAGIC:
            raise StoreError(f"{self.path} is not an a2a_flask record log "
                             f"(it starts with {head[:24]!r})")
        self.end = len(MAGIC)

    def close(self) -> None:
        """Close both files (a no-op when they are closed)."""
        for fd in (self._fd, self._lock_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._lock_fd = -1

    def _check_process(self) -> bool:
        """Reopen after a fork (a lock fd shared with the parent would share its lock too).
        True when the files were reopened, so the caller must reread from the start."""
        if self._pid == os.getpid():
            return False
        self._fd = self._lock_fd = -1  # the parent's descriptors: leave them to it
        self._open()
        return True

    # ------------------------------------------------------------ locking

    def locked(self) -> "_Locked":
        """``with log.locked():`` hold the exclusive write lock, waiting cooperatively."""
        return _Locked(self)

    def _acquire(self) -> None:
        for pause in _lock_pauses(LOCK_TIMEOUT):
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
            # time.sleep is gevent's under a gevent worker: other greenlets run meanwhile.
            time.sleep(pause)
        raise LockTimeout(f"the shelve store at {self.path} stayed locked by another process "
                          f"for {LOCK_TIMEOUT:g}s")

    def _release(self) -> None:
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    # ------------------------------------------------------------ reading

    def changes(self) -> Tuple[bool, List[Tuple[int, bytes]]]:
        """The records appended since the last call: ``(restarted, [(offset, payload)])``.

        ``restarted`` is True when the file was replaced (compaction) or
        reopened: the records then are the whole new file, and what the caller
        built from the old one is void.
        """
        restarted = self._check_process()
        try:
            ino = os.stat(self.path).st_ino
        except FileNotFoundError:
            raise StoreError(f"the shelve store's log {self.path} was removed") from None
        if ino != self._ino:
            self._reopen_log()
            restarted = True
        size = os.fstat(self._fd).st_size
        if size <= self.end:
            return restarted, []
        return restarted, self._scan(size)

    def _scan(self, size: int) -> List[Tuple[int, bytes]]:
        records: List[Tuple[int, bytes]] = []
        position = self.end
        buffer, base = b"", position  # buffer holds the file's bytes from offset base on

        def have(upto: int) -> bool:
            """Make the buffer reach file offset ``upto``; False at the end of the file."""
            nonlocal buffer, base
            if upto <= base + len(buffer):
                return True
            kept = buffer[position - base:]
            buffer = kept + os.pread(self._fd, max(READ_CHUNK, upto - position - len(kept)),
                                     position + len(kept))
            base = position
            return upto <= base + len(buffer)

        while position + _FRAME.size <= size and have(position + _FRAME.size):
            length, checksum = _FRAME.unpack_from(buffer, position - base)
            end = position + _FRAME.size + length
            if 0 < length <= MAX_RECORD and end <= size and have(end):
                payload = buffer[position - base + _FRAME.size:end - base]
                if zlib.crc32(payload) == checksum:
                    records.append((position + _FRAME.size, payload))
                    position = end
                    continue
            skip = self._unreadable(position, size)
            if skip is None:
                break  # a torn tail: never read past it; the next writer cuts it off
            position = skip
        self.end = position
        return records

    def _unreadable(self, position: int, size: int) -> Optional[int]:
        """What to do about the frame at ``position`` that cannot be read (see the
        module docstring): None for a torn tail, or the offset of the next good
        frame, where reading goes on past the damage."""
        resume = self._next_frame(position, size)
        if resume is not None:
            log.error("record log %s: %d bytes at offset %d cannot be read (damaged, or a "
                      "record over %d bytes) and are skipped; the %d bytes after them are "
                      "kept", self.path, resume - position, position, MAX_RECORD,
                      size - resume)
        return resume

    def _next_frame(self, position: int, size: int) -> Optional[int]:
        """The offset of the first whole frame with a good checksum after ``position``.

        Frames of records under 16 MiB are found, wherever they are: their
        header starts with a zero byte, which JSON text never holds (so the
        search runs through records at the speed of ``bytes.find``, and
        through a run of zeros at that of a regular expression).
        """
        start = position + 1
        while start + _FRAME.size <= size:
            block = os.pread(self._fd, min(READ_CHUNK, size - start), start)
            if not block:
                return None
            at = block.find(b"\0")
            while at >= 0:
                if block[at:at + 4] == b"\0\0\0\0":  # a zero length: no frame starts here
                    nonzero = _NONZERO.search(block, at)
                    if nonzero is None:
                        break
                    at = max(at + 1, nonzero.start() - 3)  # a length may end in zeros
                    continue
                if self._good_frame_at(start + at, size):
                    return start + at
                at = block.find(b"\0", at + 1)
            start += max(1, len(block) - _FRAME.size)  # (a header may cross blocks)
        return None

    def _good_frame_at(self, position: int, size: int) -> bool:
        """Whether a whole frame with a good checksum starts at ``position``."""
        header = os.pread(self._fd, _FRAME.size, position)
        if len(header) < _FRAME.size:
            return False
        length: int
        checksum: int
        length, checksum = _FRAME.unpack(header)
        if not 0 < length <= MAX_RECORD or position + _FRAME.size + length > size:
            return False
        payload = os.pread(self._fd, length, position + _FRAME.size)
        return len(payload) == length and zlib.crc32(payload) == checksum

    def read(self, offset: int, length: int) -> bytes:
        """The payload at ``offset`` (as :meth:`changes` reported it) of ``length`` bytes."""
        return os.pread(self._fd, length, offset)

    def size(self) -> int:
        """The file's current size in bytes."""
        return os.fstat(self._fd).st_size

    def version(self) -> Tuple[int, int]:
        """Changes whenever anyone appends or compacts (cheap: one ``stat``)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return (0, 0)
        return (st.st_ino, st.st_size)

    # ------------------------------------------------------------ writing

    def append(self, payloads: List[bytes]) -> List[int]:
        """Append records (call under :meth:`locked`, after :meth:`changes`); their offsets.

        They are in the page cache (a killed process loses nothing) but not yet
        on disk: see :meth:`flusher`.
        """
        offsets = []
        data = bytearray()
        for payload in payloads:  # (framing refuses a record no reader would take)
            offsets.append(self.end + len(data) + _FRAME.size)
            data += frame(payload)
        size = os.fstat(self._fd).st_size
        if size > self.end:
            # A writer died mid-frame: its record was never acknowledged (the scan
            # stops short of the end only at such a torn tail).
            log.warning("shelve store %s: dropping %d bytes of an interrupted write",
                        self.path, size - self.end)
            os.ftruncate(self._fd, self.end)
        written = os.pwrite(self._fd, bytes(data), self.end)
        if written != len(data):
            # Disk full: cut the partial frame so readers and writers see the old end.
            os.ftruncate(self._fd, self.end)
            raise StoreError(f"short write to {self.path} ({written} of {len(data)} bytes)")
        self.end += len(data)
        return offsets

    def flusher(self) -> "Flusher":
        """A handle that flushes what was appended so far to disk; take it under the
        lock, call it after releasing the lock (so other writers need not wait for the disk)."""
        return Flusher(os.dup(self._fd))

    @contextlib.contextmanager
    def rewrite(self) -> Iterator["Rewrite"]:
        """Compaction (call under :meth:`locked`, after :meth:`changes`)::

            with log.rewrite() as new:
                ref = new.add(payload)  # ...for each live record

        On a clean exit the new file replaces the log, and this process reads on
        from its end: it knows what it wrote, so its next :meth:`changes` reports
        nothing (other processes see a restart).  If the block raises, the log
        stays as it was.
        """
        new = Rewrite(self.path)
        try:
            yield new
            new.install()
        except BaseException:
            new.discard()
            raise
        self._reopen_log()
        self.end = new.end


class Rewrite:
    """A new version of a log file, written beside it as ``path + ".tmp"``."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._temporary = path + ".tmp"
        self._out = open(self._temporary, "wb", buffering=READ_CHUNK)
        self._out.write(MAGIC)
        #: Where the next frame starts: the new file's size so far.
        self.end = len(MAGIC)

    def add(self, payload: bytes) -> Tuple[int, int]:
        """Write one record; where its payload is in the new file: ``(offset, length)``."""
        self._out.write(frame(payload))
        offset = self.end + _FRAME.size
        self.end = offset + len(payload)
        return offset, len(payload)

    def install(self) -> None:
        """Flush the new file to disk, then rename it over the old one (atomically)."""
        self._out.flush()
        off_the_hub(os.fsync, self._out.fileno())
        self._out.close()
        os.replace(self._temporary, self._path)
        _fsync_directory(self._path)

    def discard(self) -> None:
        """Give up: close and remove the new file (the old one is untouched)."""
        self._out.close()
        try:
            os.unlink(self._temporary)
        except FileNotFoundError:
            pass


class Flusher:
    """Flushes a log file to disk once (its own descriptor: a compaction may close the log's)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def __call__(self) -> None:
        """``fdatasync``, in gevent's thread pool under gevent; then close the descriptor.

        Everything appended before, by any process, is on disk afterwards: a write
        is acknowledged only then, and whatever a power cut loses is a suffix of the log.
        """
        try:
            off_the_hub(os.fdatasync, self._fd)
        finally:
            os.close(self._fd)


class _Locked:
    def __init__(self, owner: RecordLog) -> None:
        self._log = owner

    def __enter__(self) -> RecordLog:
        self._log._acquire()
        return self._log

    def __exit__(self, *_: object) -> None:
        self._log._release()
